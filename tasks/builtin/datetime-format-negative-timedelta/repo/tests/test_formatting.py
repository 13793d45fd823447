import unittest
from datetime import timedelta

from elapsed import as_clock, as_span, relative, split_timedelta


class SplitTests(unittest.TestCase):
    def test_positive(self):
        self.assertEqual(tuple(split_timedelta(timedelta(days=2, hours=3, minutes=4, seconds=5, microseconds=6))), (1, 2, 3, 4, 5, 6))

    def test_zero(self):
        self.assertEqual(tuple(split_timedelta(timedelta(0))), (1, 0, 0, 0, 0, 0))

    def test_negative_whole_days(self):
        self.assertEqual(tuple(split_timedelta(timedelta(days=-3))), (-1, 3, 0, 0, 0, 0))


class ClockTests(unittest.TestCase):
    def test_clock(self):
        self.assertEqual(as_clock(timedelta(hours=1, minutes=2, seconds=3)), "1:02:03")
        self.assertEqual(as_clock(timedelta(days=1, minutes=5, seconds=7)), "24:05:07")

    def test_clock_micro(self):
        self.assertEqual(as_clock(timedelta(seconds=1, microseconds=25), show_micro=True), "0:00:01.000025")


class SpanTests(unittest.TestCase):
    def test_span(self):
        self.assertEqual(as_span(timedelta(hours=26, minutes=3, seconds=9)), "1d 2h")
        self.assertEqual(as_span(timedelta(hours=26, minutes=3, seconds=9), max_units=4), "1d 2h 3m 9s")
        self.assertEqual(as_span(timedelta(minutes=1, seconds=1)), "1m 1s")

    def test_span_small(self):
        self.assertEqual(as_span(timedelta(microseconds=10)), "0s")
        with self.assertRaises(ValueError):
            as_span(timedelta(1), max_units=0)


class RelativeTests(unittest.TestCase):
    def test_future_and_past(self):
        self.assertEqual(relative(timedelta(hours=3, minutes=10)), "in 3 hours")
        self.assertEqual(relative(timedelta(days=-2, hours=-1)), "2 days ago")
        self.assertEqual(relative(timedelta(minutes=-1)), "1 minute ago")

    def test_just_now(self):
        self.assertEqual(relative(timedelta(seconds=-10)), "just now")
        self.assertEqual(relative(timedelta(days=40)), "in 1 month")


if __name__ == "__main__":
    unittest.main()
