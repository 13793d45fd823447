import unittest

from spans import IntervalSet


class AddTests(unittest.TestCase):
    def test_disjoint_intervals_sorted(self):
        s = IntervalSet([(10, 12), (0, 3), (5, 6)])
        self.assertEqual(list(s), [(0, 3), (5, 6), (10, 12)])

    def test_overlapping_and_touching_merge(self):
        s = IntervalSet([(0, 3), (2, 5), (5, 7), (9, 10)])
        self.assertEqual(list(s), [(0, 7), (9, 10)])

    def test_bridge_merges_many(self):
        s = IntervalSet([(0, 1), (2, 3), (4, 5), (8, 9)])
        s.add(0.5, 4.5)
        self.assertEqual(list(s), [(0, 5), (8, 9)])

    def test_empty_and_invalid(self):
        s = IntervalSet([(3, 3)])
        self.assertFalse(s)
        with self.assertRaises(ValueError):
            s.add(5, 4)


class QueryTests(unittest.TestCase):
    def test_contains_is_half_open(self):
        s = IntervalSet([(0, 2), (4, 6)])
        self.assertIn(0, s)
        self.assertIn(1.999, s)
        self.assertNotIn(2, s)
        self.assertNotIn(-1, s)
        self.assertIn(5, s)

    def test_total_length(self):
        self.assertEqual(IntervalSet([(0, 2), (4, 6.5)]).total_length(), 4.5)

    def test_overlaps(self):
        s = IntervalSet([(0, 2), (4, 6)])
        self.assertTrue(s.overlaps(1, 3))
        self.assertFalse(s.overlaps(2, 4))
        self.assertTrue(s.overlaps(-5, 10))


class DiscardTests(unittest.TestCase):
    def test_punch_hole_in_middle(self):
        s = IntervalSet([(0, 10)])
        s.discard(3, 5)
        self.assertEqual(list(s), [(0, 3), (5, 10)])

    def test_remove_prefix(self):
        s = IntervalSet([(0, 10)])
        s.discard(-2, 4)
        self.assertEqual(list(s), [(4, 10)])

    def test_remove_whole_intervals(self):
        s = IntervalSet([(0, 1), (2, 3), (4, 5), (6, 7)])
        s.discard(2, 5)
        self.assertEqual(list(s), [(0, 1), (6, 7)])

    def test_discard_outside_is_noop(self):
        s = IntervalSet([(0, 1), (5, 6)])
        s.discard(2, 4)
        s.discard(1, 5)
        self.assertEqual(list(s), [(0, 1), (5, 6)])


class AlgebraTests(unittest.TestCase):
    def test_union(self):
        a = IntervalSet([(0, 2)])
        b = IntervalSet([(1, 4), (6, 7)])
        self.assertEqual(list(a | b), [(0, 4), (6, 7)])

    def test_intersection(self):
        a = IntervalSet([(0, 5), (8, 12)])
        b = IntervalSet([(3, 9), (11, 20)])
        self.assertEqual(list(a & b), [(3, 5), (8, 9), (11, 12)])

    def test_difference_leaves_operands_alone(self):
        a = IntervalSet([(0, 10)])
        b = IntervalSet([(2, 3), (5, 6)])
        self.assertEqual(list(a - b), [(0, 2), (3, 5), (6, 10)])
        self.assertEqual(list(a), [(0, 10)])


if __name__ == "__main__":
    unittest.main()
