def count_words(text):
    """The number of words in `text` (words are separated by whitespace)."""
    if not text:
        return 0
    return len(text.split(" "))


def count_lines(text):
    return len(text.splitlines())
