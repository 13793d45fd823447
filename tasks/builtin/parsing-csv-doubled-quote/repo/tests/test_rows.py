import unittest

from rowsplit import RowError, join_row, read_dicts, read_rows, split_row, write_rows


class SplitTests(unittest.TestCase):
    def test_plain_fields(self):
        self.assertEqual(split_row("a,b,,d"), ["a", "b", "", "d"])

    def test_quoted_delimiter(self):
        self.assertEqual(split_row('1,"Smith, John",3'), ["1", "Smith, John", "3"])

    def test_empty_quoted_field(self):
        self.assertEqual(split_row('"",x'), ["", "x"])

    def test_quote_inside_unquoted_field_is_literal(self):
        self.assertEqual(split_row('5" pipe,ok'), ['5" pipe', "ok"])

    def test_skip_initial_space(self):
        self.assertEqual(split_row('a,  "b c", d', skip_initial_space=True), ["a", "b c", "d"])

    def test_other_delimiter(self):
        self.assertEqual(split_row("a;b;'c;d'", delimiter=";", quote="'"), ["a", "b", "c;d"])

    def test_unterminated(self):
        with self.assertRaises(RowError):
            split_row('a,"b')


class ReadTests(unittest.TestCase):
    def test_multiline_field(self):
        text = 'id,note\n1,"line one\nline two"\n2,short\n'
        self.assertEqual(read_rows(text), [["id", "note"], ["1", "line one\nline two"], ["2", "short"]])

    def test_blank_lines_skipped(self):
        self.assertEqual(read_rows("a,b\n\n1,2\n"), [["a", "b"], ["1", "2"]])

    def test_read_dicts_pads_short_rows(self):
        self.assertEqual(read_dicts("k,v,w\n1,2\n"), [{"k": "1", "v": "2", "w": ""}])

    def test_read_dicts_rejects_long_rows(self):
        with self.assertRaises(RowError):
            read_dicts("k\n1,2\n")


class WriteTests(unittest.TestCase):
    def test_join_quotes_when_needed(self):
        self.assertEqual(join_row(["a", "b,c", " pad", "", None]), 'a,"b,c"," pad","",')

    def test_roundtrip_simple(self):
        rows = [["name", "city"], ["Ann", "Oslo, Norway"], ["Bo", "line\nbreak"]]
        self.assertEqual(read_rows(write_rows(rows)), rows)


if __name__ == "__main__":
    unittest.main()
