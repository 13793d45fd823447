"""Regenerate the shipped `tiny` model folder (`trainer/inference/assets/tiny/`).

    .venv/bin/python scripts/build_tiny_model.py [--out DIR] [--root DIR]

The folder holds a tokenizer, a chat template and a model config, and no weights: the
policy is randomly initialised from a seed at load time (`trainer.inference.models.load_policy`).
Nothing is downloaded; everything below is built from this repository's own text.
It runs only when the shipped folder must change, never in training.

Over 450 lines on purpose: the tokenizer's corpus, merges and chat template are written out
here in one piece, where a reader can check what the shipped files were made from.

- Tokenizer: byte-level BPE (ByteLevel pre-tokenizer and decoder over all 256 bytes), so
  any NFC text round-trips exactly through encode/decode. The pipeline is Qwen2's (NFC,
  Qwen2's split regex, ByteLevel), because transformers 5 builds exactly that for any
  `qwen2` folder whatever tokenizer.json says; text that is not NFC (decomposed accents,
  say) comes back NFC-composed, as with Qwen2.5 itself. 2048 ids in all: 2039 learned
  (256 byte symbols + merges), then 9 added tokens: `<|endoftext|>` (2039, pad),
  `<|im_start|>` (2040), `<|im_end|>` (2041, eos) as special tokens, and `<tool_call>`,
  `</tool_call>`, `<tool_response>`, `</tool_response>`, `<tools>`, `</tools>`
  (2042-2047) as plain added tokens (single ids, kept by `skip_special_tokens=True`).
  Trained on every *.py, *.md and *.yaml file under the repository root (sorted by path;
  virtualenvs, .git and caches skipped) plus the built-in samples in `BUILTIN_CORPUS`.
  Training is single-threaded on a fixed corpus order, so the output is byte-for-byte
  reproducible for a given repository state (editing the repository's text changes it).
- Chat template: Qwen2.5's ChatML template with Hermes-style tool calls (default system
  prompt "You are a helpful assistant."), saved as chat_template.jinja.
- Config: a 2-layer `Qwen2Config` (hidden 64, 4 heads, 2 KV heads), tied embeddings.
"""

from __future__ import annotations

import argparse
import json
import os

# Single-threaded training: one merge order whatever the machine. Set before `tokenizers`
# is imported (its thread pool reads it once).
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import shutil  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

from tokenizers import (  # noqa: E402
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = REPO_ROOT / "trainer" / "inference" / "assets" / "tiny"

VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>"]
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
MODEL_MAX_LENGTH = 8192
# Qwen2's pre-tokenizer split (transformers' `models/qwen2/tokenization_qwen2.py`): GPT-2's,
# but with digits one at a time and newlines kept apart from other whitespace.
PRETOKENIZE_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

CORPUS_SUFFIXES = (".py", ".md", ".yaml")
SKIP_DIRS = {
    ".venv", "venv", ".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache",
    ".hypothesis", ".tox", "node_modules", "runs", "build", "dist",
}  # fmt: skip

# Qwen2.5's template (ChatML + Hermes tool calls), with its default system prompt replaced
# by "You are a helpful assistant.". Two robustness additions that leave Qwen's output
# unchanged for the inputs Qwen handles: `arguments` given as a JSON string (the OpenAI
# wire format) is emitted as-is instead of being JSON-quoted a second time, and a `None`
# content renders as empty.
CHAT_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] or '' }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + (messages[0]['content'] or '') + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {%- if tool_call.arguments is string %}
                {{- tool_call.arguments }}
            {%- else %}
                {{- tool_call.arguments | tojson }}
            {%- endif %}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content or '' }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

# Samples of what the policy reads and writes: Python, shell sessions, tool calls and
# responses in the chat format, and plain English.
BUILTIN_CORPUS = [
    # Python
    '''def add(a, b):
    """Return the sum of a and b."""
    return a + b


def fibonacci(n: int) -> list[int]:
    result = [0, 1]
    while len(result) < n:
        result.append(result[-1] + result[-2])
    return result[:n]


class Stack:
    def __init__(self) -> None:
        self.items: list[object] = []

    def push(self, item: object) -> None:
        self.items.append(item)

    def pop(self) -> object:
        if not self.items:
            raise IndexError("pop from empty stack")
        return self.items.pop()

    def __len__(self) -> int:
        return len(self.items)
''',
    """import json
import os
import sys
from pathlib import Path


def load_config(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: main.py CONFIG", file=sys.stderr)
        return 2
    config = load_config(argv[0])
    for key, value in sorted(config.items()):
        print(f"{key} = {value!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
""",
    """import unittest

from calculator import divide, parse_number


class TestCalculator(unittest.TestCase):
    def test_divide(self):
        self.assertEqual(divide(6, 3), 2)
        self.assertAlmostEqual(divide(1, 3), 0.3333, places=3)

    def test_divide_by_zero(self):
        with self.assertRaises(ZeroDivisionError):
            divide(1, 0)

    def test_parse_number(self):
        self.assertEqual(parse_number(" 42 "), 42)
        self.assertIsNone(parse_number("abc"))


if __name__ == "__main__":
    unittest.main()
""",
    """def parse_number(text):
    try:
        return int(text.strip())
    except ValueError:
        return None


def count_words(lines):
    counts = {}
    for line in lines:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class Point:
    x: float
    y: float

    def distance(self, other: "Point") -> float:
        return ((self.x - other.x) ** 2 + (self.y - other.y) ** 2) ** 0.5
""",
    """Traceback (most recent call last):
  File "/repo/src/app.py", line 12, in <module>
    main()
  File "/repo/src/app.py", line 8, in main
    value = items[index]
IndexError: list index out of range
""",
    """======================================================================
FAIL: test_divide (tests.test_calculator.TestCalculator.test_divide)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/repo/tests/test_calculator.py", line 8, in test_divide
    self.assertEqual(divide(6, 3), 2)
AssertionError: 3 != 2

----------------------------------------------------------------------
Ran 3 tests in 0.002s

FAILED (failures=1)
""",
    "...\n----------------------------------------------------------------------\nRan 3 tests in 0.001s\n\nOK\n",
    # Shell
    """$ ls -la
total 24
drwxr-xr-x  4 user user 4096 Jan  1 12:00 .
drwxr-xr-x 10 user user 4096 Jan  1 12:00 ..
-rw-r--r--  1 user user  512 Jan  1 12:00 README.md
drwxr-xr-x  2 user user 4096 Jan  1 12:00 src
drwxr-xr-x  2 user user 4096 Jan  1 12:00 tests
$ cat src/calculator.py
$ grep -rn "def divide" src/
src/calculator.py:4:def divide(a, b):
$ grep -n "return" src/calculator.py | head -n 5
$ sed -n '1,40p' src/calculator.py
$ sed -i 's/return a \\/\\/ b/return a \\/ b/' src/calculator.py
$ python3 -m unittest discover -s tests -v
$ python3 -m unittest tests.test_calculator
$ python3 -m pytest -q tests/
$ git status
$ git diff
diff --git a/src/calculator.py b/src/calculator.py
index 3b18e51..a9c2f4d 100644
--- a/src/calculator.py
+++ b/src/calculator.py
@@ -1,5 +1,5 @@
 def divide(a, b):
-    return a // b
+    return a / b
$ git log --oneline -n 5
$ find . -name "*.py" -not -path "./.git/*"
$ wc -l src/*.py
$ head -n 20 README.md
$ echo $?
0
$ cd /repo && ls
$ mkdir -p build && cp -r src build/
$ pip install -e .
""",
    # Tool calls and responses
    '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "ls -la"}}\n</tool_call>',
    '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "python3 -m unittest -v"}}\n</tool_call>',
    '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "grep -rn \\"TODO\\" src/"}}\n</tool_call>',
    '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "git diff"}}\n</tool_call>',
    '<tool_call>\n{"name": "str_replace_editor", "arguments": {"command": "view", "path": "/repo/src/calculator.py"}}\n</tool_call>',
    '<tool_call>\n{"name": "str_replace_editor", "arguments": {"command": "str_replace", "path": "/repo/src/calculator.py", '
    '"old_str": "    return a // b", "new_str": "    return a / b"}}\n</tool_call>',
    '<tool_call>\n{"name": "str_replace_editor", "arguments": {"command": "create", "path": "/repo/notes.txt", '
    '"file_text": "hello\\nworld\\n"}}\n</tool_call>',
    '<tool_call>\n{"name": "finish", "arguments": {"message": "Fixed the bug and the tests pass."}}\n</tool_call>',
    "<tool_response>\nexit code: 0\nstdout:\nREADME.md\nsrc\ntests\n</tool_response>",
    "<tool_response>\nexit code: 1\nstderr:\nFAILED (failures=1)\n</tool_response>",
    "<tool_response>\nThe file /repo/src/calculator.py has been edited.\n</tool_response>",
    '<tools>\n{"type": "function", "function": {"name": "execute_bash", "description": "Run a bash command.", '
    '"parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command."}}, '
    '"required": ["command"]}}}\n</tools>',
    '{"name": "execute_bash", "arguments": {"command": "cat setup.py"}}',
    '{"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function", '
    '"function": {"name": "execute_bash", "arguments": "{\\"command\\": \\"ls\\"}"}}]}',
    '{"ok": true, "count": 3, "items": [1, 2, 3], "error": null, "path": "/tmp/out.json"}',
    # A chat transcript
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nFix the failing test.<|im_end|>\n"
    "<|im_start|>assistant\nLet me look at the repository first.\n<tool_call>\n"
    '{"name": "execute_bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\nsrc\ntests\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    # English
    "You are a helpful assistant. You may call one or more functions to assist with the user query.",
    "The test fails because the function uses integer division instead of true division. "
    "I will change `//` to `/` and run the tests again.",
    "Let me look at the file to understand what it does before making any changes.",
    "All tests pass now. The bug was an off-by-one error in the loop bounds.",
    "Please fix the issue described below. The repository is checked out at /repo. "
    "Make the smallest change that resolves the issue, then call finish.",
    "The quick brown fox jumps over the lazy dog. Numbers like 0, 1, 42, 3.14 and 2024 appear in text, "
    "as do punctuation marks: commas, periods; colons: and (parentheses) [brackets] {braces}.",
    "Reinforcement learning trains a policy to maximise the expected reward of its trajectories.",
]


def repo_corpus(root: Path) -> Iterator[str]:
    """The text of every *.py, *.md and *.yaml file under `root`, in sorted path order."""
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        paths.extend(Path(dirpath) / f for f in filenames if f.endswith(CORPUS_SUFFIXES))
    for path in sorted(paths, key=lambda p: p.relative_to(root).as_posix()):
        try:
            yield path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue


def train_tokenizer(corpus: list[str]) -> Tokenizer:
    """Byte-level BPE with exactly the pipeline transformers 5's `Qwen2Tokenizer` builds
    (it rebuilds normalizer, pre-tokenizer and decoder itself for a `qwen2` config, keeping
    only vocab, merges and post-processor from tokenizer.json), so every loader of any
    version tokenizes the way the BPE was trained."""
    tokenizer = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS) - len(TOOL_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: nothing is unknown
        special_tokens=[],
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer, length=len(corpus))
    return tokenizer


def build(out_dir: Path, root: Path) -> None:
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    corpus = list(repo_corpus(root)) + BUILTIN_CORPUS
    raw = train_tokenizer(corpus)
    learned = raw.get_vocab_size()
    if learned != VOCAB_SIZE - len(SPECIAL_TOKENS) - len(TOOL_TOKENS):
        raise RuntimeError(f"BPE learned {learned} ids; the corpus is too small for a vocab of {VOCAB_SIZE}")
    # The added tokens cannot collide with learned ones: the split regex never lets `<`,
    # letters and `>` (or `|`) into one pre-token.
    raw.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    raw.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=None,
        extra_special_tokens=["<|im_start|>", "<|im_end|>"],
        model_max_length=MODEL_MAX_LENGTH,
        padding_side="right",
        clean_up_tokenization_spaces=False,
        chat_template=CHAT_TEMPLATE,
    )
    if len(tokenizer) != VOCAB_SIZE:
        raise RuntimeError(f"tokenizer has {len(tokenizer)} ids, expected {VOCAB_SIZE}")
    for token in SPECIAL_TOKENS + TOOL_TOKENS:
        if len(tokenizer.encode(token, add_special_tokens=False)) != 1:
            raise RuntimeError(f"{token} is not a single id")

    config = Qwen2Config(
        vocab_size=-(-len(tokenizer) // 64) * 64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        use_cache=True,
        dtype="float32",  # written as `dtype` (transformers 4.x called it `torch_dtype`)
        architectures=["Qwen2ForCausalLM"],
    )

    # Write into a fresh folder, then swap it in, so no stale file survives a rebuild.
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent) as tmp:
        staging = Path(tmp) / out_dir.name
        tokenizer.save_pretrained(staging)
        config.save_pretrained(staging)
        _normalise_tokenizer_config(staging / "tokenizer_config.json")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        shutil.move(str(staging), str(out_dir))


def _normalise_tokenizer_config(path: Path) -> None:
    """Make tokenizer_config.json loadable by transformers 4.x as well as 5.x: name the
    generic fast-tokenizer class (5.x writes `TokenizersBackend`, unknown to 4.x) and list
    the extra special tokens under 4.x's key, which 5.x reads too."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    extra = data.pop("extra_special_tokens", None)
    if extra:
        data["additional_special_tokens"] = extra
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="repository whose text trains the BPE")
    args = parser.parse_args()
    build(args.out.resolve(), args.root.resolve())
    for path in sorted(args.out.resolve().iterdir()):
        print(f"{path.stat().st_size:>9,}  {path}")


if __name__ == "__main__":
    main()
