import unittest

from paragraph import fill, shorten, wrap

LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua."
)


class WrapTests(unittest.TestCase):
    def test_greedy(self):
        self.assertEqual(
            wrap("The quick brown fox jumps over the lazy dog", 15),
            ["The quick brown", "fox jumps over", "the lazy dog"],
        )

    def test_lines_fit_without_indent(self):
        for width in range(12, 40):
            for line in wrap(LOREM, width):
                self.assertLessEqual(len(line), width)

    def test_whitespace_collapsed(self):
        self.assertEqual(wrap("  a \n b\t\tc  ", 10), ["a b c"])
        self.assertEqual(wrap("", 10), [])

    def test_same_width_indents(self):
        self.assertEqual(
            wrap("alpha beta gamma delta", 12, initial_indent="* ", subsequent_indent="  "),
            ["* alpha beta", "  gamma", "  delta"],
        )

    def test_long_word_broken(self):
        self.assertEqual(wrap("abcdefghij kl", 4), ["abcd", "efgh", "ij", "kl"])

    def test_long_word_kept(self):
        self.assertEqual(wrap("a abcdefghij b", 4, break_long_words=False), ["a", "abcdefghij", "b"])

    def test_indent_too_wide(self):
        with self.assertRaises(ValueError):
            wrap("x", 4, subsequent_indent="    ")


class FillTests(unittest.TestCase):
    def test_paragraphs(self):
        text = "one two three\nfour\n\n  \nfive six"
        self.assertEqual(fill(text, 9), "one two\nthree\nfour\n\nfive six")


class ShortenTests(unittest.TestCase):
    def test_fits(self):
        self.assertEqual(shorten("Hello   world", 20), "Hello world")

    def test_cut(self):
        self.assertEqual(shorten("Hello  world, how are you?", 18), "Hello world, [...]")
        self.assertEqual(shorten("Supercalifragilistic", 8), "[...]")


if __name__ == "__main__":
    unittest.main()
