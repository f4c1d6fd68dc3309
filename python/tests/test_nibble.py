"""The nibble package on the real test models: tokenizer, greedy text equal to the CLI's,
streaming, stop strings, chat, errors."""

import json
import os
import subprocess

import pytest

import nibble
from conftest import MODELS

PROMPT = "In the beginning"


def text_of(completion):
    return completion["choices"][0]["text"]


def joined(chunks):
    return "".join(c["choices"][0]["text"] for c in chunks)


# ---------------------------------------------------------------- the library and model

def test_library_version():
    assert nibble.library_version() == nibble.__version__


def test_model_info(kjv):
    assert kjv.n_vocab() == 4096
    assert kjv.n_ctx() == 256  # the model's training length: the CLI's default context
    assert kjv.token_bos() == 1 and kjv.token_eos() == 2
    assert kjv.info["arch"] == "llama"
    assert kjv.open_report["as_stored"]


# ---------------------------------------------------------------- tokenizer

def test_tokenize_golden(kjv):
    with open(os.path.join(MODELS, "kjv-7m", "tokenizer-golden.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    assert cases
    for c in cases:
        assert kjv.tokenize(c["text"]) == c["ids"], c["text"]


@pytest.mark.parametrize("text", ["In the beginning God created the heaven and the earth.",
                                  "  1 And the earth was without form, and void;",
                                  "Hello world", "é ß 日本 🙂", ""])
def test_tokenize_roundtrip(kjv, text):
    ids = kjv.tokenize(text)
    assert ids[0] == kjv.token_bos()
    assert kjv.tokenize(text.encode("utf-8")) == ids  # str and bytes alike
    assert kjv.tokenize(text, add_bos=False) == ids[1:]
    assert kjv.detokenize(ids) == text.encode("utf-8")
    assert kjv.detokenize(ids, special=True).startswith(b"<s>")


def test_token_to_piece(kjv):
    assert kjv.token_to_piece(1046) == b" In"


# ---------------------------------------------------------------- completions

@pytest.mark.parametrize("prompt,n", [(PROMPT, 24), ("And God said", 16),
                                      ("  1 And the earth was", 40)])
def test_greedy_equals_cli(kjv, kjv_path, cli, prompt, n):
    got = text_of(kjv.create_completion(prompt, max_tokens=n, temperature=0))
    want = cli("run", "-m", kjv_path, "--path", "source", "-p", prompt, "-n", str(n),
               "--temp", "0", "-t", "2")
    assert want.endswith("\n")
    assert got == want[:-1]


def test_greedy_equals_reference(kjv):
    """The ids llama.cpp and PyTorch agree on (reference.json case 0), as text."""
    with open(os.path.join(MODELS, "kjv-7m", "reference.json"), encoding="utf-8") as f:
        case = json.load(f)["cases"][0]
    prompt, greedy = case["prompt"], case["greedy"][:24]
    want = kjv.detokenize(prompt + greedy)[len(kjv.detokenize(prompt)):].decode()
    assert text_of(kjv.create_completion(case["text"], max_tokens=24, temperature=0)) == want
    # a prompt given as ids is the same prompt
    assert text_of(kjv.create_completion(prompt, max_tokens=24, temperature=0)) == want


def test_weight_path_f32_equals_cli(kjv_path, cli, tmp_path):
    """weights="f32" goes through the warm-start cache as `nibble run --path f32` does."""
    cache = tmp_path / "cache"
    want = cli("run", "-m", kjv_path, "--path", "f32", "-p", PROMPT, "-n", "20", "--temp", "0",
               "-t", "2", env={"XDG_CACHE_HOME": str(cache)})
    with nibble.Model(kjv_path, weights="f32", n_threads=2, cache_dir=cache / "nibble") as m:
        assert m.info["weight_path"] == "f32"
        assert m.open_report["cache_event"] == "hit"  # the entry the CLI wrote
        assert text_of(m.create_completion(PROMPT, max_tokens=20, temperature=0)) == want[:-1]


def test_completion_shape(kjv):
    r = kjv.create_completion(PROMPT, max_tokens=8, temperature=0)
    assert r["object"] == "text_completion" and r["id"].startswith("cmpl-")
    assert isinstance(r["created"], int) and r["model"].endswith("kjv-7m-f32.gguf")
    (choice,) = r["choices"]
    assert choice["index"] == 0 and choice["logprobs"] is None
    assert choice["finish_reason"] == "length"
    assert r["usage"] == {"prompt_tokens": 4, "completion_tokens": 8, "total_tokens": 12}
    assert kjv(PROMPT, max_tokens=8, temperature=0)["choices"][0]["text"] == choice["text"]


def test_stream_equals_whole(kjv):
    whole = kjv.create_completion(PROMPT, max_tokens=32, temperature=0)
    chunks = list(kjv.create_completion(PROMPT, max_tokens=32, temperature=0, stream=True))
    assert len(chunks) > 2
    assert joined(chunks) == text_of(whole)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"] == whole["usage"]


def test_stream_left_early(kjv):
    """A stream closed early stops the library and frees the model for the next call."""
    stream = kjv.create_completion(PROMPT, max_tokens=200, temperature=0, stream=True)
    first = next(stream)
    with pytest.raises(RuntimeError, match="busy"):
        kjv.create_completion(PROMPT, max_tokens=2)
    stream.close()
    assert text_of(kjv.create_completion(PROMPT, max_tokens=4, temperature=0)).startswith(
        text_of(first))


def test_stop_strings(kjv, kjv_path, cli):
    r = kjv.create_completion(PROMPT, max_tokens=24, temperature=0, stop=["God", "Amen"])
    assert text_of(r) == " of the Lord Jesus Christ, and of the Lord, and of "
    assert r["choices"][0]["finish_reason"] == "stop"
    want = cli("run", "-m", kjv_path, "--path", "source", "-p", PROMPT, "-n", "24", "--temp",
               "0", "-t", "2", "--stop", "God", "--stop", "Amen")
    assert text_of(r) == want[:-1]
    chunks = list(kjv.create_completion(PROMPT, max_tokens=24, temperature=0, stop="God",
                                        stream=True))
    assert joined(chunks) == text_of(r)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    # a stop string that never comes: the whole text, finish_reason "length"
    assert kjv.create_completion(PROMPT, max_tokens=8, temperature=0,
                                 stop="Zion")["choices"][0]["finish_reason"] == "length"


def test_sampled_equals_cli(kjv, kjv_path, cli):
    """The same sampler chain and seed as the CLI: the same sampled text, every time."""
    kw = dict(max_tokens=20, temperature=0.9, top_k=40, top_p=0.95, min_p=0.05, seed=5)
    a = text_of(kjv.create_completion(PROMPT, **kw))
    assert a == text_of(kjv.create_completion(PROMPT, **kw))
    want = cli("run", "-m", kjv_path, "--path", "source", "-p", PROMPT, "-n", "20", "--temp",
               "0.9", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05", "--seed", "5",
               "-t", "2")
    assert a == want[:-1]


def test_logit_bias_and_echo(kjv):
    r = kjv.create_completion(PROMPT, max_tokens=4, temperature=0, logit_bias={614: 100})
    assert text_of(r) == (kjv.token_to_piece(614) * 4).decode()
    e = kjv.create_completion(PROMPT, max_tokens=4, temperature=0, echo=True)
    assert text_of(e) == PROMPT + text_of(kjv.create_completion(PROMPT, max_tokens=4,
                                                                temperature=0))


def test_context_end(kjv_path):
    """max_tokens None: up to the end of the context; without a shift it stops there."""
    with nibble.Model(kjv_path, weights="source", n_ctx=32, n_threads=2,
                      context_shift=False) as m:
        r = m.create_completion(PROMPT, max_tokens=None, temperature=0)
        assert r["choices"][0]["finish_reason"] == "length"
        assert r["usage"]["total_tokens"] == 32
        with pytest.raises(nibble.NibbleError):
            m.create_completion(" ".join(["light"] * 60), max_tokens=4)


# ---------------------------------------------------------------- chat

def test_chat_own_template_equals_cli(agent, agent_path, cli):
    task = "Task: turn on wifi. Screen: [wifi] Wi-Fi off. Next action?"
    r = agent.create_chat_completion([{"role": "user", "content": task}], temperature=0,
                                     max_tokens=40)
    assert r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
    (choice,) = r["choices"]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] == "stop"  # the template's end-of-turn token
    content = choice["message"]["content"]
    assert json.loads(content)["action"]  # the phone agent answers one JSON action
    want = cli("chat", "-m", agent_path, "--path", "source", "--temp", "0", "-n", "40", "-t",
               "2", stdin=(task + "\n").encode())
    assert content == want.rstrip("\n")
    chunks = list(agent.create_chat_completion([{"role": "user", "content": task}],
                                               temperature=0, max_tokens=40, stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == content
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_chat_named_template_equals_cli(kjv_path, cli):
    with nibble.Model(kjv_path, weights="source", n_threads=2, chat_format="chatml") as m:
        r = m.create_chat_completion([{"role": "user", "content": "And God said"}],
                                     temperature=0, max_tokens=12)
    want = cli("chat", "-m", kjv_path, "--path", "source", "--chat-template", "chatml",
               "--temp", "0", "-n", "12", "-t", "2", stdin=b"And God said\n")
    assert r["choices"][0]["message"]["content"] == want.rstrip("\n")


def test_chat_without_template(kjv):
    with pytest.raises(nibble.NibbleError, match="no chat template.*chat_format"):
        kjv.create_chat_completion([{"role": "user", "content": "hello"}])


# ---------------------------------------------------------------- errors

def test_missing_file():
    with pytest.raises(nibble.NibbleError, match="no such file") as e:
        nibble.Model("/nonexistent/model.gguf")
    assert "/nonexistent/model.gguf" in str(e.value)
    assert isinstance(e.value.status, int) and e.value.status != 0


def test_bad_weight_path(kjv_path):
    with pytest.raises(nibble.NibbleError, match="w5a5") as e:
        nibble.Model(kjv_path, weights="w5a5")
    assert e.value.status_name == "invalid argument"


@pytest.mark.parametrize("kw", [dict(top_p=-1), dict(min_p=2), dict(temperature=-1),
                                dict(repeat_penalty=0), dict(presence_penalty=5)])
def test_bad_sampling(kjv, kw):
    with pytest.raises(nibble.NibbleError, match="out of range"):
        kjv.create_completion(PROMPT, max_tokens=2, **kw)


def test_bad_arguments(kjv, kjv_path):
    with pytest.raises(nibble.NibbleError, match="outside the vocabulary"):
        kjv.create_completion(PROMPT, max_tokens=2, logit_bias={99999: 1.0})
    with pytest.raises(nibble.NibbleError):
        kjv.detokenize([99999])
    with pytest.raises(TypeError):
        kjv.tokenize(12)
    with pytest.raises(TypeError):
        kjv.create_completion(PROMPT, max_tokens="8")
    with pytest.raises(ValueError):
        kjv.create_completion([], max_tokens=2)
    with pytest.raises(ValueError):
        kjv.create_chat_completion([])
    with pytest.raises(ValueError):
        nibble.Model(kjv_path, n_ctx=-1)
    with pytest.raises(ValueError, match="kv_type"):
        nibble.Model(kjv_path, weights="source", kv_type="f8")
    with pytest.raises(NotImplementedError):
        kjv.create_completion(PROMPT, logprobs=2)


def test_closed_model(kjv_path):
    with nibble.Model(kjv_path, weights="source", n_threads=2) as m:
        assert m.tokenize("God")
    with pytest.raises(nibble.NibbleError, match="closed"):
        m.tokenize("God")
    m.close()  # twice is fine


def _serve_embeddings(kjv_path, inputs):
    """nibble serve's /v1/embeddings for inputs (the CLI's server on a free port)."""
    import re
    import time
    import urllib.request
    binary = os.environ["NIBBLE_BIN"]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    p = subprocess.Popen([binary, "serve", "-m", kjv_path, "--path", "source", "--port", "0",
                          "-t", "2"], stderr=subprocess.PIPE, env=env)
    try:
        port, deadline = None, time.time() + 60
        while port is None and time.time() < deadline:
            line = p.stderr.readline().decode("utf-8", "replace")
            if not line and p.poll() is not None:
                break
            m = re.search(r"listening on http://[^:]*:(\d+)", line)
            if m:
                port = int(m.group(1))
        assert port, "the server did not start"
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings",
                                     data=json.dumps({"input": inputs}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_embeddings(kjv, kjv_path):
    texts = ["In the beginning God created the heaven and the earth.", "And the LORD said"]
    one = kjv.embed(texts[0])
    assert len(one) == kjv.info["n_embd"]
    assert abs(sum(x * x for x in one) - 1.0) < 1e-4
    assert kjv.embed(texts[0]) == one  # the same text, the same vector
    assert kjv.embed(kjv.tokenize(texts[0], special=True)) == one  # ids as the text's
    both = kjv.embed(texts)
    assert both[0] == one and both[1] != one
    assert kjv.embed(texts[1], pooling="last") != both[1]
    r = kjv.create_embedding(texts)
    assert r["object"] == "list" and [d["index"] for d in r["data"]] == [0, 1]
    assert r["usage"]["prompt_tokens"] == sum(len(kjv.tokenize(t, special=True)) for t in texts)
    # the server's vectors for the same texts (mean pooling, its default)
    srv = _serve_embeddings(kjv_path, texts)
    for mine, theirs in zip(both, srv["data"]):
        assert max(abs(a - b) for a, b in zip(mine, theirs["embedding"])) < 1e-6
    with pytest.raises(ValueError):
        kjv.embed(texts[0], pooling="max")
    with pytest.raises(ValueError):
        kjv.embed([])
