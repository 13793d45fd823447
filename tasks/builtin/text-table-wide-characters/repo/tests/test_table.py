import unittest

from gridtext import Table, cell_text, clip, pad


class CellTests(unittest.TestCase):
    def test_cell_text(self):
        self.assertEqual(cell_text(None), "")
        self.assertEqual(cell_text(2.5), "2.50")
        self.assertEqual(cell_text(2.5, ".1f"), "2.5")
        self.assertEqual(cell_text("two\nlines"), "two lines")

    def test_pad(self):
        self.assertEqual(pad("ab", 5), "ab   ")
        self.assertEqual(pad("ab", 5, "right"), "   ab")
        self.assertEqual(pad("ab", 5, "center"), " ab  ")
        self.assertEqual(pad("abcdef", 3), "abcdef")
        with self.assertRaises(ValueError):
            pad("x", 3, "middle")

    def test_clip(self):
        self.assertEqual(clip("abcdefgh", 5), "abcd\u2026")
        self.assertEqual(clip("abc", 5), "abc")
        self.assertEqual(clip("abcdefgh", 5, ellipsis="..."), "ab...")


class RenderTests(unittest.TestCase):
    def make(self, **kwargs):
        t = Table(["item", "qty", "price"], **kwargs)
        t.add_rows([("apple", 3, 0.5), ("kiwi", 12, 1.25)])
        return t

    def test_grid(self):
        self.assertEqual(
            self.make().render("grid"),
            "+-------+-----+-------+\n"
            "| item  | qty | price |\n"
            "+=======+=====+=======+\n"
            "| apple |   3 |  0.50 |\n"
            "| kiwi  |  12 |  1.25 |\n"
            "+-------+-----+-------+",
        )

    def test_plain(self):
        self.assertEqual(
            self.make().render(),
            "item   qty  price\n-----  ---  -----\napple    3   0.50\nkiwi    12   1.25",
        )

    def test_markdown(self):
        self.assertEqual(
            self.make(align=["left", "center", "right"]).render("markdown"),
            "| item  | qty | price |\n| :---- | :-: | ----: |\n| apple |  3  |  0.50 |\n| kiwi  | 12  |  1.25 |",
        )

    def test_max_col_width(self):
        t = Table(["name"], max_col_width=6)
        t.add_row("Bartholomew")
        self.assertEqual(t.render(), "name  \n------\nBarth\u2026")

    def test_short_rows_padded_and_long_rejected(self):
        t = Table(["a", "b"])
        t.add_row("x")
        self.assertEqual(t.render("grid").splitlines()[3], "| x |   |")
        with self.assertRaises(ValueError):
            t.add_row(1, 2, 3)

    def test_bad_style(self):
        with self.assertRaises(ValueError):
            self.make().render("html")


if __name__ == "__main__":
    unittest.main()
