import unittest

from cmdsplit import SplitError, join, parse_command, quote, split


class SplitTests(unittest.TestCase):
    def test_plain_words(self):
        self.assertEqual(split("ls -la  /tmp"), ["ls", "-la", "/tmp"])

    def test_double_quotes_group_words(self):
        self.assertEqual(split('grep "hello world" notes.txt'), ["grep", "hello world", "notes.txt"])

    def test_single_quotes_are_literal(self):
        self.assertEqual(split("echo '$HOME \\n'"), ["echo", "$HOME \\n"])

    def test_backslash_escapes(self):
        self.assertEqual(split(r"touch my\ file"), ["touch", "my file"])
        self.assertEqual(split(r'echo "say \"hi\" \x"'), ["echo", 'say "hi" \\x'])

    def test_adjacent_parts_join(self):
        self.assertEqual(split("--name=\"a b\"'c'"), ["--name=a bc"])

    def test_line_continuation(self):
        self.assertEqual(split("make \\\n  all"), ["make", "all"])

    def test_comments(self):
        self.assertEqual(split("run # the rest", comments=True), ["run"])
        self.assertEqual(split("run a#b", comments=True), ["run", "a#b"])
        self.assertEqual(split("run # x"), ["run", "#", "x"])

    def test_unterminated_quote(self):
        with self.assertRaises(SplitError) as ctx:
            split("echo 'oops")
        self.assertEqual(ctx.exception.position, 5)

    def test_trailing_backslash(self):
        with self.assertRaises(SplitError):
            split("echo \\")


class QuoteTests(unittest.TestCase):
    def test_safe_argument_unchanged(self):
        self.assertEqual(quote("file-1.txt"), "file-1.txt")

    def test_quote_roundtrip(self):
        args = ["echo", "it's", "a b", "$x", 'say "hi"']
        self.assertEqual(split(join(args)), args)

    def test_parse_command(self):
        env, argv = parse_command("CC=clang CFLAGS='-O2 -g' make -j4")
        self.assertEqual(env, {"CC": "clang", "CFLAGS": "-O2 -g"})
        self.assertEqual(argv, ["make", "-j4"])


if __name__ == "__main__":
    unittest.main()
