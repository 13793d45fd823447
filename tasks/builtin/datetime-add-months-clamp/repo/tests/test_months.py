import unittest
from datetime import date, datetime

from calmath import add_months, add_years, month_end, month_start, months_between, quarter, quarter_start


class AddMonthsTests(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(add_months(date(2023, 10, 15), 4), date(2024, 2, 15))
        self.assertEqual(add_months(date(2024, 3, 15), -3), date(2023, 12, 15))

    def test_zero(self):
        self.assertEqual(add_months(date(2024, 1, 31), 0), date(2024, 1, 31))

    def test_month_end_to_longer_month(self):
        self.assertEqual(add_months(date(2024, 1, 31), 2), date(2024, 3, 31))
        self.assertEqual(add_months(date(2024, 4, 30), 1), date(2024, 5, 30))

    def test_datetime_keeps_time(self):
        self.assertEqual(add_months(datetime(2024, 5, 10, 8, 30), 1), datetime(2024, 6, 10, 8, 30))

    def test_overflow(self):
        with self.assertRaises(OverflowError):
            add_months(date(9999, 12, 1), 1)

    def test_add_years(self):
        self.assertEqual(add_years(date(2020, 6, 1), 4), date(2024, 6, 1))


class MonthTests(unittest.TestCase):
    def test_start_and_end(self):
        self.assertEqual(month_start(date(2024, 2, 10)), date(2024, 2, 1))
        self.assertEqual(month_end(date(2024, 2, 10)), date(2024, 2, 29))
        self.assertEqual(month_end(date(2023, 2, 10)), date(2023, 2, 28))

    def test_months_between(self):
        self.assertEqual(months_between(date(2024, 1, 15), date(2024, 3, 14)), 1)
        self.assertEqual(months_between(date(2024, 1, 15), date(2024, 3, 15)), 2)
        self.assertEqual(months_between(date(2024, 1, 31), date(2024, 2, 29)), 1)
        self.assertEqual(months_between(date(2024, 3, 15), date(2024, 1, 15)), -2)

    def test_quarters(self):
        self.assertEqual([quarter(date(2024, m, 1)) for m in (1, 3, 4, 9, 12)], [1, 1, 2, 3, 4])
        self.assertEqual(quarter_start(date(2024, 8, 19)), date(2024, 7, 1))


if __name__ == "__main__":
    unittest.main()
