import unittest

from slugkit import slugify, unique_slug


class SlugifyTests(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")
        self.assertEqual(slugify("  --Already--slugged--  "), "already-slugged")

    def test_accents_and_specials(self):
        self.assertEqual(slugify("Crème Brûlée & Co."), "creme-brulee-and-co")
        self.assertEqual(slugify("Straße in Łódź"), "strasse-in-lodz")

    def test_case_kept(self):
        self.assertEqual(slugify("Hello World", lowercase=False), "Hello-World")

    def test_underscore_separator(self):
        self.assertEqual(slugify("a  b -- c", separator="_"), "a_b_c")

    def test_stopwords(self):
        self.assertEqual(slugify("The Lord of the Rings", stopwords={"the", "of"}), "lord-rings")
        self.assertEqual(slugify("The The", stopwords={"the"}), "the-the")

    def test_max_length_cuts_at_boundary(self):
        self.assertEqual(slugify("one two three four", max_length=12), "one-two")
        self.assertEqual(slugify("one two three", max_length=7), "one-two")
        self.assertEqual(slugify("abcdefghij", max_length=4), "abcd")

    def test_keep_characters(self):
        self.assertEqual(slugify("notes v1.2.txt", keep="."), "notes-v1.2.txt")
        self.assertEqual(slugify("a - b -c", keep="-"), "a-b-c")

    def test_empty(self):
        self.assertEqual(slugify("!!!"), "")
        with self.assertRaises(ValueError):
            slugify("x", separator="")


class UniqueTests(unittest.TestCase):
    def test_unique(self):
        taken = {"report", "report-2"}
        self.assertEqual(unique_slug("Report", taken.__contains__), "report-3")
        self.assertEqual(unique_slug("Summary", taken.__contains__), "summary")


if __name__ == "__main__":
    unittest.main()
