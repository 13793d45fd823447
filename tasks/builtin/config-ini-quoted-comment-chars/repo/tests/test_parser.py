import unittest

from confini import IniError, loads

SAMPLE = """
# global settings
name = demo

[server]
host = 0.0.0.0
port: 8080   ; http
debug = yes
url = http://example.com/docs#install
allowed = a;b;c

[paths]
include =
    /etc/app
    /usr/share/app  # vendor
"""


class ParseTests(unittest.TestCase):
    def setUp(self):
        self.ini = loads(SAMPLE)

    def test_default_section(self):
        self.assertEqual(self.ini.get("", "name"), "demo")

    def test_inline_comment(self):
        self.assertEqual(self.ini.getint("server", "port"), 8080)

    def test_comment_chars_without_space_are_value(self):
        self.assertEqual(self.ini["server"]["url"], "http://example.com/docs#install")
        self.assertEqual(self.ini.getlist("server", "allowed", sep=";"), ["a", "b", "c"])

    def test_bool_and_case_insensitive_keys(self):
        self.assertTrue(self.ini.getbool("server", "DEBUG"))
        self.assertIsNone(self.ini.getbool("server", "missing"))

    def test_continuation(self):
        self.assertEqual(self.ini.getlist("paths", "include"), ["/etc/app", "/usr/share/app"])


class QuoteTests(unittest.TestCase):
    def test_quotes_keep_spaces(self):
        self.assertEqual(loads('pad = "  x  "')[""]["pad"], "  x  ")

    def test_escapes(self):
        self.assertEqual(loads(r'q = "say \"hi\" \\o/"')[""]["q"], 'say "hi" \\o/')

    def test_unterminated(self):
        with self.assertRaises(IniError):
            loads('q = "open')


class ErrorTests(unittest.TestCase):
    def test_errors_have_line_numbers(self):
        with self.assertRaises(IniError) as ctx:
            loads("[a]\nx = 1\nx = 2\n")
        self.assertEqual(ctx.exception.lineno, 3)

    def test_missing_equals(self):
        with self.assertRaises(IniError):
            loads("[a]\njust text\n")

    def test_duplicate_section(self):
        with self.assertRaises(IniError):
            loads("[a]\n[a]\n")


if __name__ == "__main__":
    unittest.main()
