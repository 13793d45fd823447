from pathlib import Path

ANSWER = Path("/app/answer.txt")


def test_answer_exists():
    assert ANSWER.is_file()


def test_answer_is_the_count():
    assert ANSWER.read_text().strip() == "3"
