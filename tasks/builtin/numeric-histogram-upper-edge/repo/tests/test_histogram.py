import math
import unittest

from binstats import Histogram


class ConstructionTests(unittest.TestCase):
    def test_rejects_bad_arguments(self):
        with self.assertRaises(ValueError):
            Histogram(1, 1)
        with self.assertRaises(ValueError):
            Histogram(0, 1, bins=0)
        with self.assertRaises(ValueError):
            Histogram(0, math.inf)

    def test_edges(self):
        self.assertEqual(Histogram(0, 10, bins=5).edges(), [0, 2, 4, 6, 8, 10])


class CountingTests(unittest.TestCase):
    def test_values_land_in_half_open_bins(self):
        h = Histogram(0, 10, bins=5)
        h.update([0, 1.99, 2, 5, 7.5, 9.99])
        self.assertEqual(h.counts, [2, 1, 1, 1, 1])

    def test_outliers_tracked_separately(self):
        h = Histogram(0, 1, bins=2)
        h.update([-0.1, 0.25, 3, float("nan")])
        self.assertEqual((h.underflow, h.counts, h.overflow, h.nan), (1, [1, 0], 1, 1))
        self.assertEqual(h.total(), 1)
        self.assertEqual(h.total(include_outliers=True), 3)

    def test_weights(self):
        h = Histogram(0, 2, bins=2)
        h.add(0.5, weight=2.5)
        h.add(1.5, weight=0.5)
        self.assertEqual(h.counts, [2.5, 0.5])


class SummaryTests(unittest.TestCase):
    def test_mean_from_bin_centres(self):
        h = Histogram(0, 4, bins=4)
        h.update([0.2, 1.7, 1.1, 3.3])
        self.assertAlmostEqual(h.mean(), (0.5 + 1.5 + 1.5 + 3.5) / 4)

    def test_quantile_interpolates(self):
        h = Histogram(0, 10, bins=10)
        h.update([0.5, 1.5, 2.5, 3.5])
        self.assertAlmostEqual(h.quantile(0.5), 2.0)
        self.assertAlmostEqual(h.quantile(0.0), 0.0)

    def test_density_integrates_to_one(self):
        h = Histogram(-1, 1, bins=4)
        h.update([-0.9, -0.2, 0.1, 0.3, 0.6])
        self.assertAlmostEqual(sum(d * h.width for d in h.density()), 1.0)


if __name__ == "__main__":
    unittest.main()
