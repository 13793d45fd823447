"""workcal: business-day arithmetic with weekends and holiday calendars."""

from .business import BusinessCalendar, add_business_days, business_days_between, is_business_day

__all__ = ["BusinessCalendar", "add_business_days", "business_days_between", "is_business_day"]
