import unittest
from datetime import timedelta

from spanparse import DurationError, format_duration, parse_duration


class ParseTests(unittest.TestCase):
    def test_compact(self):
        self.assertEqual(parse_duration("1h30m"), timedelta(hours=1, minutes=30))
        self.assertEqual(parse_duration("90s"), timedelta(seconds=90))
        self.assertEqual(parse_duration("2d4h"), timedelta(days=2, hours=4))

    def test_spaces_commas_and(self):
        self.assertEqual(parse_duration("1w, 2d and 3h"), timedelta(weeks=1, days=2, hours=3))

    def test_fractions_and_sign(self):
        self.assertEqual(parse_duration("1.5h"), timedelta(minutes=90))
        self.assertEqual(parse_duration("-.5m"), timedelta(seconds=-30))
        self.assertEqual(parse_duration("+3D"), timedelta(days=3))

    def test_errors(self):
        for text in ("", "-", "5", "h", "5 parsecs", "1h 30"):
            with self.subTest(text=text), self.assertRaises(DurationError):
                parse_duration(text)


class FormatTests(unittest.TestCase):
    def test_short(self):
        self.assertEqual(format_duration(timedelta(days=1, hours=2, seconds=5)), "1d 2h 5s")
        self.assertEqual(format_duration(timedelta(0)), "0s")

    def test_long(self):
        self.assertEqual(format_duration(timedelta(hours=1, minutes=1), long=True), "1 hour, 1 minute")

    def test_negative_and_max_terms(self):
        self.assertEqual(format_duration(timedelta(minutes=-90)), "-1h 30m")
        self.assertEqual(format_duration(timedelta(days=2, hours=3, minutes=4), max_terms=2), "2d 3h")

    def test_roundtrip_short(self):
        for td in (timedelta(seconds=1), timedelta(days=3, minutes=7), timedelta(hours=-5)):
            self.assertEqual(parse_duration(format_duration(td)), td)


if __name__ == "__main__":
    unittest.main()
