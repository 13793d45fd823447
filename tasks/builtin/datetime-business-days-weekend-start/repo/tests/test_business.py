import unittest
from datetime import date

from workcal import BusinessCalendar, add_business_days, business_days_between, is_business_day

D = date
XMAS = [D(2024, 12, 25), D(2024, 12, 26), D(2025, 1, 1)]


class IsBusinessDayTests(unittest.TestCase):
    def test_weekdays_and_weekends(self):
        self.assertTrue(is_business_day(D(2024, 6, 7)))  # Friday
        self.assertFalse(is_business_day(D(2024, 6, 8)))  # Saturday
        self.assertFalse(is_business_day(D(2024, 12, 25), XMAS))

    def test_next_business_day(self):
        cal = BusinessCalendar(XMAS)
        self.assertEqual(cal.next_business_day(D(2024, 12, 25)), D(2024, 12, 27))
        self.assertEqual(cal.next_business_day(D(2024, 12, 28)), D(2024, 12, 30))


class BetweenTests(unittest.TestCase):
    def test_one_week(self):
        self.assertEqual(business_days_between(D(2024, 6, 3), D(2024, 6, 10)), 5)

    def test_partial_weeks(self):
        self.assertEqual(business_days_between(D(2024, 6, 6), D(2024, 6, 11)), 3)
        self.assertEqual(business_days_between(D(2024, 6, 8), D(2024, 6, 10)), 0)

    def test_holidays_and_direction(self):
        self.assertEqual(business_days_between(D(2024, 12, 23), D(2025, 1, 6), XMAS), 7)
        self.assertEqual(business_days_between(D(2025, 1, 6), D(2024, 12, 23), XMAS), -7)


class AddTests(unittest.TestCase):
    def test_within_week(self):
        self.assertEqual(add_business_days(D(2024, 6, 3), 3), D(2024, 6, 6))

    def test_over_weekend(self):
        self.assertEqual(add_business_days(D(2024, 6, 7), 1), D(2024, 6, 10))
        self.assertEqual(add_business_days(D(2024, 6, 10), -1), D(2024, 6, 7))

    def test_whole_weeks_from_weekday(self):
        self.assertEqual(add_business_days(D(2024, 6, 5), 10), D(2024, 6, 19))
        self.assertEqual(add_business_days(D(2024, 6, 5), -5), D(2024, 5, 29))

    def test_from_weekend_small_offsets(self):
        self.assertEqual(add_business_days(D(2024, 6, 8), 1), D(2024, 6, 10))
        self.assertEqual(add_business_days(D(2024, 6, 9), -2), D(2024, 6, 6))

    def test_zero(self):
        self.assertEqual(add_business_days(D(2024, 6, 8), 0), D(2024, 6, 8))

    def test_consecutive_holidays(self):
        self.assertEqual(add_business_days(D(2024, 12, 24), 1, XMAS), D(2024, 12, 27))
        self.assertEqual(add_business_days(D(2024, 12, 27), -1, XMAS), D(2024, 12, 24))
        self.assertEqual(add_business_days(D(2024, 12, 23), 5, XMAS), D(2025, 1, 2))


if __name__ == "__main__":
    unittest.main()
