import unittest

from pennies import Currency, allocate, format_amount, get_currency, parse_amount


class ParseTests(unittest.TestCase):
    def test_plain_and_grouped(self):
        self.assertEqual(parse_amount("12.34"), 1234)
        self.assertEqual(parse_amount("1,234,567.89"), 123456789)

    def test_missing_decimals_are_zero(self):
        self.assertEqual(parse_amount("7"), 700)
        self.assertEqual(parse_amount("7.5"), 750)

    def test_negative_forms(self):
        self.assertEqual(parse_amount("-0.50"), -50)
        self.assertEqual(parse_amount("($3.25)"), -325)
        self.assertEqual(parse_amount("-$3.25"), -325)

    def test_too_many_decimals_rejected(self):
        with self.assertRaises(ValueError):
            parse_amount("1.234")
        with self.assertRaises(ValueError):
            parse_amount("5.5", "JPY")

    def test_garbage_rejected(self):
        for text in ("", "abc", "1,23.00", "1.2.3"):
            with self.subTest(text=text), self.assertRaises(ValueError):
                parse_amount(text)


class FormatTests(unittest.TestCase):
    def test_positive(self):
        self.assertEqual(format_amount(0), "0.00")
        self.assertEqual(format_amount(5), "0.05")
        self.assertEqual(format_amount(123456789), "1,234,567.89")

    def test_options(self):
        self.assertEqual(format_amount(100000, grouping=False), "1000.00")
        self.assertEqual(format_amount(1999, "GBP", symbol=True), "£19.99")

    def test_negative_whole_amount(self):
        self.assertEqual(format_amount(-50000), "-500.00")
        self.assertEqual(format_amount(-2500, "EUR", symbol=True), "-€25.00")

    def test_zero_exponent_currency(self):
        self.assertEqual(format_amount(1234567, "JPY", symbol=True), "¥1,234,567")

    def test_rejects_float(self):
        with self.assertRaises(TypeError):
            format_amount(12.5)

    def test_roundtrip_positive(self):
        for text in ("0.01", "19.99", "1,000,000.00"):
            with self.subTest(text=text):
                self.assertEqual(format_amount(parse_amount(text)), text)


class AllocateTests(unittest.TestCase):
    def test_even_split_remainder(self):
        self.assertEqual(allocate(100, [1, 1, 1]), [34, 33, 33])

    def test_weighted_split(self):
        self.assertEqual(allocate(1000, [70, 20, 10]), [700, 200, 100])
        self.assertEqual(sum(allocate(1001, [3, 3, 1])), 1001)

    def test_negative_total(self):
        self.assertEqual(allocate(-100, [1, 1, 1]), [-34, -33, -33])


class CurrencyTests(unittest.TestCase):
    def test_lookup(self):
        self.assertEqual(get_currency("usd").exponent, 2)
        cur = Currency("XTS", 4)
        self.assertIs(get_currency(cur), cur)
        with self.assertRaises(KeyError):
            get_currency("ZZZ")


if __name__ == "__main__":
    unittest.main()
