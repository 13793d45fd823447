import unittest
from fractions import Fraction

from ratio import Mixed, format_mixed, nearest, parse_mixed, pretty, to_mixed


class ToMixedTests(unittest.TestCase):
    def test_positive_improper(self):
        self.assertEqual(to_mixed(Fraction(11, 4)), Mixed(1, 2, 3, 4))

    def test_whole_numbers(self):
        self.assertEqual(str(to_mixed(5)), "5")
        self.assertEqual(str(to_mixed(-5)), "-5")
        self.assertEqual(str(to_mixed(0)), "0")

    def test_proper_fraction(self):
        self.assertEqual(str(to_mixed("3/8")), "3/8")


class FormatTests(unittest.TestCase):
    def test_format(self):
        self.assertEqual(format_mixed(Fraction(7, 2)), "3 1/2")

    def test_limit_denominator(self):
        self.assertEqual(format_mixed(Fraction(333, 100), max_denominator=3), "3 1/3")


class ParseTests(unittest.TestCase):
    def test_parse_forms(self):
        self.assertEqual(parse_mixed("2 3/4"), Fraction(11, 4))
        self.assertEqual(parse_mixed(" 3/4 "), Fraction(3, 4))
        self.assertEqual(parse_mixed("+7"), 7)
        self.assertEqual(parse_mixed("-2 1/4"), Fraction(-9, 4))

    def test_parse_errors(self):
        for text in ("", "1 5/4", "a/b", "1/2/3"):
            with self.subTest(text=text), self.assertRaises(ValueError):
                parse_mixed(text)
        with self.assertRaises(ZeroDivisionError):
            parse_mixed("1/0")

    def test_roundtrip_positive(self):
        for fr in (Fraction(1, 3), Fraction(17, 5), Fraction(8)):
            self.assertEqual(parse_mixed(format_mixed(fr)), fr)


class RoundingTests(unittest.TestCase):
    def test_nearest_sixteenth(self):
        self.assertEqual(nearest(0.30, 16), Fraction(5, 16))
        self.assertEqual(nearest(Fraction(1, 32), 16), Fraction(1, 16))
        self.assertEqual(nearest(-0.30, 16), Fraction(-5, 16))

    def test_pretty_positive(self):
        self.assertEqual(pretty(Fraction(9, 4)), "2\u00bc")
        self.assertEqual(pretty(Fraction(1, 2)), "\u00bd")
        self.assertEqual(pretty(Fraction(7, 5)), "1 2/5")


if __name__ == "__main__":
    unittest.main()
