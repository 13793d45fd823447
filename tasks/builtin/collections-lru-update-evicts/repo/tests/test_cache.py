import unittest

from lrukit import LRUCache


class BasicTests(unittest.TestCase):
    def test_get_and_put(self):
        cache = LRUCache(3)
        cache.put("a", 1)
        self.assertEqual(cache.get("a"), 1)
        self.assertIsNone(cache.get("zzz"))
        self.assertEqual(cache.get("zzz", 0), 0)

    def test_invalid_capacity(self):
        with self.assertRaises(ValueError):
            LRUCache(0)

    def test_update_below_capacity(self):
        cache = LRUCache(3)
        cache.put("a", 1)
        cache.put("a", 2)
        self.assertEqual(cache.get("a"), 2)
        self.assertEqual(len(cache), 1)


class EvictionTests(unittest.TestCase):
    def test_evicts_least_recently_used(self):
        evicted = []
        cache = LRUCache(2, on_evict=lambda k, v: evicted.append((k, v)))
        cache.put("a", 1)
        cache.put("b", 2)
        cache.put("c", 3)
        self.assertEqual(list(cache), ["b", "c"])
        self.assertEqual(evicted, [("a", 1)])

    def test_get_refreshes_recency(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.get("a")
        cache.put("c", 3)
        self.assertIn("a", cache)
        self.assertNotIn("b", cache)

    def test_peek_and_contains_do_not_refresh(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        self.assertEqual(cache.peek("a"), 1)
        self.assertIn("a", cache)
        cache.put("c", 3)
        self.assertNotIn("a", cache)

    def test_resize_shrinks(self):
        cache = LRUCache(4)
        for i in range(4):
            cache.put(i, i * 10)
        cache.resize(2)
        self.assertEqual(list(cache), [2, 3])
        self.assertEqual(cache.stats.evictions, 2)


class StatsTests(unittest.TestCase):
    def test_hits_and_misses(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.get("a")
        cache.get("b")
        cache.get("a")
        self.assertEqual((cache.stats.hits, cache.stats.misses), (2, 1))
        self.assertAlmostEqual(cache.stats.hit_rate, 2 / 3)

    def test_pop_is_not_an_eviction(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        self.assertEqual(cache.pop("a"), 1)
        self.assertEqual(cache.pop("a", None), None)
        with self.assertRaises(KeyError):
            cache.pop("a")
        self.assertEqual(cache.stats.evictions, 0)


if __name__ == "__main__":
    unittest.main()
