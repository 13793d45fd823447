import unittest
from datetime import date, timedelta

from dayspan import DateRange, date_range, weeks_in

D = date


class ForwardTests(unittest.TestCase):
    def test_iterate(self):
        self.assertEqual(list(DateRange(D(2024, 2, 27), D(2024, 3, 2))), [D(2024, 2, 27), D(2024, 2, 28), D(2024, 2, 29), D(2024, 3, 1)])

    def test_len_with_step(self):
        self.assertEqual(len(DateRange(D(2024, 1, 1), D(2024, 1, 11), 3)), 4)
        self.assertEqual(len(DateRange(D(2024, 1, 1), D(2024, 1, 10), 3)), 3)

    def test_empty_when_stop_before_start(self):
        self.assertEqual(list(DateRange(D(2024, 1, 5), D(2024, 1, 1))), [])

    def test_indexing(self):
        r = DateRange(D(2024, 1, 1), D(2024, 2, 1), 7)
        self.assertEqual((r[0], r[-1], r[1:3]), (D(2024, 1, 1), D(2024, 1, 29), [D(2024, 1, 8), D(2024, 1, 15)]))
        with self.assertRaises(IndexError):
            r[5]

    def test_contains_and_index(self):
        r = DateRange(D(2024, 1, 1), D(2024, 1, 31), 2)
        self.assertIn(D(2024, 1, 29), r)
        self.assertNotIn(D(2024, 1, 2), r)
        self.assertNotIn(D(2024, 1, 31), r)
        self.assertEqual(r.index(D(2024, 1, 5)), 2)

    def test_reversed(self):
        self.assertEqual(list(reversed(DateRange(D(2024, 1, 1), D(2024, 1, 4)))), [D(2024, 1, 3), D(2024, 1, 2), D(2024, 1, 1)])

    def test_timedelta_step(self):
        self.assertEqual(len(DateRange(D(2024, 1, 1), D(2024, 1, 15), timedelta(weeks=1))), 2)
        with self.assertRaises(ValueError):
            DateRange(D(2024, 1, 1), D(2024, 1, 2), timedelta(hours=12))
        with self.assertRaises(ValueError):
            DateRange(D(2024, 1, 1), D(2024, 1, 2), 0)


class HelperTests(unittest.TestCase):
    def test_date_range_inclusive(self):
        self.assertEqual(len(date_range(D(2024, 1, 1), D(2024, 1, 31))), 31)
        self.assertEqual(date_range(D(2024, 1, 1), D(2024, 1, 31), inclusive=False).last, D(2024, 1, 30))

    def test_weeks_in(self):
        mondays = weeks_in(D(2024, 1, 1), D(2024, 1, 31))
        self.assertEqual([d.day for d in mondays], [1, 8, 15, 22, 29])
        self.assertEqual([d.day for d in weeks_in(D(2024, 1, 2), D(2024, 1, 31), weekday=4)], [5, 12, 19, 26])


if __name__ == "__main__":
    unittest.main()
