import unittest

from statkit import StatisticsError, describe, mean, median, quantile


class CentralTests(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)
        self.assertAlmostEqual(mean([0.1] * 10), 0.1)

    def test_median_odd_and_even(self):
        self.assertEqual(median([3, 1, 2]), 2)
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_empty_sample(self):
        with self.assertRaises(StatisticsError):
            median([])
        with self.assertRaises(StatisticsError):
            quantile([], 0.5)

    def test_nan_rejected(self):
        with self.assertRaises(StatisticsError):
            median([1.0, float("nan")])


class QuantileTests(unittest.TestCase):
    def test_extremes_are_min_and_max(self):
        data = [7, 3, 9, 1]
        self.assertEqual(quantile(data, 0), 1)
        self.assertEqual(quantile(data, 1), 9)
        self.assertEqual(quantile(data, 1, method="lower"), 9)

    def test_single_value(self):
        self.assertEqual(quantile([42], 0.3), 42)

    def test_argument_checks(self):
        with self.assertRaises(ValueError):
            quantile([1, 2], 1.5)
        with self.assertRaises(ValueError):
            quantile([1, 2], 0.5, method="cubic")


class DescribeTests(unittest.TestCase):
    def test_count_mean_extremes(self):
        s = describe([5, 1, 4, 2, 3])
        self.assertEqual((s.count, s.mean, s.minimum, s.median, s.maximum), (5, 3.0, 1.0, 3.0, 5.0))


if __name__ == "__main__":
    unittest.main()
