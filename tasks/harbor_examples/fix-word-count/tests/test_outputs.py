import sys
import unittest

sys.path.insert(0, "/app")
from textutil.count import count_lines, count_words  # noqa: E402


class CountWordsTest(unittest.TestCase):
    def test_single_spaces(self):
        self.assertEqual(count_words("one two three"), 3)

    def test_runs_of_whitespace(self):
        self.assertEqual(count_words("a  b\tc\nd"), 4)

    def test_leading_and_trailing_space(self):
        self.assertEqual(count_words("  padded words  "), 2)

    def test_empty(self):
        self.assertEqual(count_words(""), 0)


class CountLinesTest(unittest.TestCase):
    def test_lines(self):
        self.assertEqual(count_lines("a\nb\n"), 2)
