import unittest

from docfmt import clean_docstring, common_indent, dedent, indent, strip_margin, summary_line


class DedentTests(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(dedent("    a\n      b\n    c\n"), "a\n  b\nc\n")

    def test_empty_lines_ignored(self):
        self.assertEqual(dedent("    a\n\n    b"), "a\n\nb")

    def test_nothing_common(self):
        self.assertEqual(dedent("a\n  b"), "a\n  b")

    def test_tabs_and_spaces_differ(self):
        self.assertEqual(dedent("\ta\n    b\n"), "\ta\n    b\n")
        self.assertEqual(common_indent("\t\ta\n\tb"), "\t")

    def test_crlf(self):
        self.assertEqual(dedent("  a\r\n  b\r\n"), "a\r\nb\r\n")


class IndentTests(unittest.TestCase):
    def test_skips_blank_lines(self):
        self.assertEqual(indent("a\n\nb\n", "> "), "> a\n\n> b\n")

    def test_predicate(self):
        self.assertEqual(indent("a\n\nb", "+", lambda line: True), "+a\n+\n+b")

    def test_strip_margin(self):
        self.assertEqual(strip_margin("  |first\n  |  second\nplain"), "first\n  second\nplain")


class DocstringTests(unittest.TestCase):
    def test_clean(self):
        doc = """Summary line.

        More text
          indented.
        """
        self.assertEqual(clean_docstring(doc), "Summary line.\n\nMore text\n  indented.")

    def test_summary_line(self):
        self.assertEqual(summary_line("""Two
            lines.

            Rest."""), "Two lines.")

    def test_empty(self):
        self.assertEqual(clean_docstring(None), "")


if __name__ == "__main__":
    unittest.main()
