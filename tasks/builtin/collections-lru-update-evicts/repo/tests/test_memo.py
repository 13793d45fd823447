import unittest

from lrukit import memoize


class MemoizeTests(unittest.TestCase):
    def test_results_are_cached(self):
        calls = []

        @memoize(maxsize=4)
        def double(x):
            calls.append(x)
            return 2 * x

        self.assertEqual([double(1), double(2), double(1)], [2, 4, 2])
        self.assertEqual(calls, [1, 2])

    def test_keyword_arguments_are_part_of_the_key(self):
        @memoize()
        def power(base, exp=2):
            return base**exp

        self.assertEqual(power(3), 9)
        self.assertEqual(power(3, exp=3), 27)
        self.assertEqual(power.cache.stats.misses, 2)

    def test_bounded_size(self):
        @memoize(maxsize=2)
        def ident(x):
            return x

        for i in range(5):
            ident(i)
        self.assertEqual(len(ident.cache), 2)
        ident.cache_clear()
        self.assertEqual(len(ident.cache), 0)

    def test_wraps_metadata(self):
        @memoize()
        def documented():
            """Docs."""

        self.assertEqual(documented.__name__, "documented")
        self.assertEqual(documented.__doc__, "Docs.")


if __name__ == "__main__":
    unittest.main()
