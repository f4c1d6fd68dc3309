"""nibble.Model: a model, its tokenizer and one context, with completions shaped as
llama-cpp-python's (and OpenAI's) dicts.

Generation is the library's: nb_sequence_generate runs the prompt and draws the tokens
(the sampler chain and the context shift are nb_sampler's and nb_sequence's), and each
token goes through nb_text_out (streaming detokenizer, stop strings, end of generation),
as `nibble run` drives them (app/cmd_run.c) — so the greedy text is the CLI's.
"""

import ctypes
import json
import os
import queue
import threading
import time
import uuid

from . import _lib
from ._lib import NibbleError

def _bytes(text, what):
    if isinstance(text, bytes):
        return text
    if isinstance(text, str):
        return text.encode("utf-8")
    raise TypeError(f"{what} must be str or bytes, not {type(text).__name__}")


def _cstr(value):
    return None if value is None else _bytes(value, "a string argument")


class _TextStep:
    """One generation's token -> text step (nb_text_out): feed ids, get released text."""

    def __init__(self, tok, stops):
        L = _lib.lib()
        self._stops = [_bytes(s, "a stop string") for s in stops]
        arr = (ctypes.c_char_p * max(1, len(self._stops)))(*self._stops)
        p = _lib.default_params("nb_text_out_default_params")
        p.stops = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
        p.n_stops = len(self._stops)
        h = ctypes.c_void_p()
        _lib.check(L.nb_text_out_init(ctypes.byref(h), tok, ctypes.byref(p)), "text output")
        self._h = h
        self._pending = b""  # released bytes not yet returned (always whole UTF-8 here)

    def feed(self, token):
        """(event, text): NB_TEXT_MORE and the text released, or the event that ends it."""
        L = _lib.lib()
        ptr, n = ctypes.c_void_p(), ctypes.c_size_t(0)
        ev = L.nb_text_out_feed(self._h, token, ctypes.byref(ptr), ctypes.byref(n))
        if ev == _lib.NB_TEXT_ERROR:
            raise _lib.error(_lib.NB_ERR_INTERNAL, "detokenizer")
        text = ctypes.string_at(ptr, n.value) if n.value else b""
        return ev, text.decode("utf-8", "replace")

    def flush(self):
        L = _lib.lib()
        ptr, n = ctypes.c_void_p(), ctypes.c_size_t(0)
        L.nb_text_out_flush(self._h, ctypes.byref(ptr), ctypes.byref(n))
        text = ctypes.string_at(ptr, n.value) if n.value else b""
        return text.decode("utf-8", "replace")

    def free(self):
        if self._h:
            _lib.lib().nb_text_out_free(self._h)
            self._h = None


class Model:
    """A model opened as `nibble run` opens it (nb_model_open), its tokenizer, and one
    context of n_ctx tokens.

    model_path: a GGUF file, a llama2.c checkpoint, a Hugging Face folder or a .nib.
    n_ctx: tokens the context holds (0: the model's training length, at most 4096 —
        the CLI's default).
    weights: the weight path — "auto" (the selector's choice for this CPU), "source"
        (the weights as stored) or a path name ("w4a8", "w4a16", "w8a16", "bf16", "f32").
        (`nibble run --path`; not called `path` here because that reads as the model
        file's path next to model_path.)
    n_threads: worker threads (None: all online cores). n_batch: tokens per prefill chunk.
    seed: the sampler's seed when a call gives none (None: the library's default, the
        CLI's without --seed, so sampled output repeats from call to call).
    cache_dir: the warm-start cache a quantized model is kept in (None: the usual folder,
        $XDG_CACHE_HOME/nibble or ~/.cache/nibble, as the CLI); use_cache=False
        quantizes into memory instead.
    priority: what "auto" optimises ("balanced", "speed", "fidelity", "memory").
    calib_path: calibration text for GPTQ when "auto" asks for it (None: the CLI's —
        $NIBBLE_CALIB, else the library's default, share/nibble/calib.txt beside it; "":
        none).
    chat_format: a built-in chat template ("chatml", "qwen3", "llama3", "llama2",
        "gemma") instead of the model's own.
    context_shift: when the context is full, keep the start and drop the oldest half of
        the rest, as the CLI does (False: stop there, finish_reason "length").
    kv_type: the KV cache's type ("f32", "f16", "bf16", "q8_0"; None: the default).
    verbose: False lowers the library's log level to errors only (process-wide).
    """

    def __init__(self, model_path, n_ctx=0, weights="auto", n_threads=None, n_batch=512,
                 seed=None, cache_dir=None, use_cache=True, priority=None, calib_path=None,
                 chat_format=None, context_shift=True, kv_type=None, verbose=True):
        self._model = self._ctx = self._tok = None
        self._busy = threading.Lock()
        L = _lib.lib()
        if not isinstance(model_path, (str, bytes, os.PathLike)):
            raise TypeError(f"model_path must be a path, not {type(model_path).__name__}")
        self.model_path = os.fsdecode(model_path)
        for name, v in (("n_ctx", n_ctx), ("n_batch", n_batch)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be a whole number >= 0, not {v!r}")
        if n_threads is not None and (not isinstance(n_threads, int) or n_threads < 1):
            raise ValueError(f"n_threads must be None or a whole number >= 1, not {n_threads!r}")
        if not verbose:
            L.nb_log_set_level(_lib.NB_LOG_ERROR)
        self.seed = seed
        self.chat_format = chat_format
        self.context_shift = bool(context_shift)

        # open: the weight path, the cache, the selector (nb_model_open)
        op = _lib.default_params("nb_open_default_params")
        keep = []  # the bytes the params point to, alive until the call returns

        def s(v):
            b = _cstr(v)
            keep.append(b)
            return b
        op.path = s(weights)
        op.n_threads = n_threads or 0
        op.use_cache = 1 if use_cache else 0
        # the library's defaults are the CLI's (its cache folder, its shipped calibration
        # text); the CLI's $NIBBLE_CALIB overrides the latter, as in app/env.c
        if cache_dir is not None:
            op.cache_dir = s(os.fsencode(cache_dir))
        if calib_path is None:
            calib_path = os.environ.get("NIBBLE_CALIB")
        if calib_path is not None:
            op.calib_path = s(os.fsencode(calib_path)) if calib_path else None
        op.select.priority = s(priority)
        # the CLI's environment (app/env.c): a forced path and more measurement records
        op.select.path = s(os.environ.get("NIBBLE_WEIGHT_PATH") or None)
        op.select.path_from = s("NIBBLE_WEIGHT_PATH")
        op.select.records_dir = s(os.environ.get("NIBBLE_MEASUREMENTS") or None)
        report = _lib.OpenReport()
        report.size = ctypes.sizeof(report)
        h = ctypes.c_void_p()
        st = L.nb_model_open(ctypes.byref(h), os.fsencode(self.model_path), ctypes.byref(op),
                             ctypes.byref(report))
        _lib.check(st)
        self._model = h
        self.open_report = {
            "loaded": report.loaded.decode("utf-8", "replace"),
            "weight_path": report.weight_path.decode(),
            "selected": bool(report.selected), "as_stored": bool(report.as_stored),
            "fell_back": bool(report.fell_back), "quantized": bool(report.quantized),
            "cache_event": report.cache_event.decode(),
            "why": report.why.decode("utf-8", "replace"),
        }
        info = _lib.ModelInfo()
        L.nb_model_get_info(h, ctypes.byref(info))
        self.info = {k: (getattr(info, k).decode() if isinstance(getattr(info, k), bytes)
                         else getattr(info, k)) for k, _ in _lib.ModelInfo._fields_}
        self._n_vocab = info.n_vocab

        tok = ctypes.c_void_p()
        st = L.nb_tokenizer_from_model(ctypes.byref(tok), h)
        if st == _lib.NB_OK:
            self._tok = tok
        else:
            self._tok_error = _lib.error(st, "no tokenizer")

        cp = _lib.default_params("nb_ctx_default_params")
        cp.n_ctx = n_ctx
        cp.n_threads = n_threads or 0
        if n_batch:
            cp.n_batch = n_batch
        if kv_type is not None:
            k = L.nb_kv_type_parse(_bytes(kv_type, "kv_type"))
            if k < 0:
                self.close()
                raise ValueError(f"kv_type {kv_type!r}: give f32, f16, bf16 or q8_0")
            cp.kv_type = k
        ctx = ctypes.c_void_p()
        st = L.nb_ctx_init(ctypes.byref(ctx), h, ctypes.byref(cp))
        if st != _lib.NB_OK:
            err = _lib.error(st)
            self.close()
            raise err
        self._ctx = ctx
        self._n_ctx = L.nb_ctx_n_ctx(ctx)

    # ------------------------------------------------------------ lifetime

    def close(self):
        """Free the context, tokenizer and model (also on `with` exit and garbage
        collection). RuntimeError while a stream of this model is still open."""
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("close: a generation of this model is still running (finish "
                               "or close its stream first)")
        try:
            L = _lib.lib() if (self._ctx or self._tok or self._model) else None
            if self._ctx:
                L.nb_ctx_free(self._ctx)
            if self._tok:
                L.nb_tokenizer_free(self._tok)
            if self._model:
                L.nb_model_free(self._model)
            self._ctx = self._tok = self._model = None
        finally:
            self._busy.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_busy", None) is not None:
                self.close()
        except Exception:
            pass

    def _need(self, what="the model"):
        if not self._model:
            raise NibbleError(f"{what}: the model is closed", _lib.NB_ERR_INVALID_ARG,
                              "invalid argument")

    def _need_tok(self):
        self._need()
        if not self._tok:
            raise self._tok_error

    # ------------------------------------------------------------ facts

    def n_ctx(self):
        """Tokens the context holds."""
        return self._n_ctx

    def n_vocab(self):
        return self._n_vocab

    def token_bos(self):
        return self.info["bos_id"]

    def token_eos(self):
        return self.info["eos_id"]

    # ------------------------------------------------------------ tokenizer

    def tokenize(self, text, add_bos=True, special=False):
        """Text (str, or bytes of UTF-8) -> token ids. add_bos: BOS (and EOS) as the
        tokenizer's config says; special: special-token text ("<|im_start|>") becomes its
        id (leave it False for untrusted text)."""
        self._need_tok()
        data = _bytes(text, "text")
        L = _lib.lib()
        n_max = len(data) // 2 + 8
        for _ in range(2):
            ids = (ctypes.c_int32 * n_max)()
            n = ctypes.c_int(0)
            st = L.nb_tokenize_text(self._tok, data, len(data), int(bool(add_bos)),
                                    int(bool(special)), ids, n_max, ctypes.byref(n))
            if st == _lib.NB_OK:
                return list(ids[:n.value])
            if st != _lib.NB_ERR_RANGE:
                raise _lib.error(st, "tokenize")
            n_max = n.value
        raise NibbleError("tokenize: the size kept growing", _lib.NB_ERR_INTERNAL,
                          "internal error")

    def _ids(self, tokens):
        try:
            ids = [int(t) for t in tokens]
        except (TypeError, ValueError):
            raise TypeError("tokens must be a sequence of ints") from None
        return (ctypes.c_int32 * max(1, len(ids)))(*ids), len(ids)

    def detokenize(self, tokens, special=False):
        """Token ids -> the text's UTF-8 bytes (special tokens left out unless special)."""
        self._need_tok()
        arr, n = self._ids(tokens)
        L = _lib.lib()
        return _lib.grow_text(lambda buf, size, ln: L.nb_detokenize_text(
            self._tok, arr, n, int(bool(special)), buf, size, ln))

    def token_to_piece(self, token):
        """The bytes one token decodes to on its own (may be part of a UTF-8 character)."""
        self._need_tok()
        L = _lib.lib()
        return _lib.grow_text(lambda buf, size, ln: L.nb_token_to_piece(
            self._tok, int(token), buf, size, ln))

    # ------------------------------------------------------------ generation

    def _sampler(self, temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                 frequency_penalty, seed, logit_bias):
        L = _lib.lib()
        sp = _lib.default_params("nb_sampler_default_params")
        try:
            sp.temperature = temperature
            sp.top_k = top_k
            sp.top_p = top_p
            sp.min_p = min_p
            sp.repeat_penalty = repeat_penalty
            sp.presence_penalty = presence_penalty
            sp.frequency_penalty = frequency_penalty
        except TypeError as e:
            raise TypeError(f"sampling parameters must be numbers: {e}") from None
        seed = self.seed if seed is None else seed
        if seed is not None:
            if not isinstance(seed, int) or seed < 0:
                raise ValueError(f"seed must be a whole number >= 0, not {seed!r}")
            sp.seed = seed & 0xFFFFFFFFFFFFFFFF
        h = ctypes.c_void_p()
        _lib.check(L.nb_sampler_init(ctypes.byref(h), ctypes.byref(sp), self._n_vocab),
                   "sampler")
        if logit_bias:
            items = [(int(k), float(v)) for k, v in dict(logit_bias).items()]
            ids = (ctypes.c_int32 * len(items))(*[k for k, _ in items])
            bias = (ctypes.c_float * len(items))(*[v for _, v in items])
            st = L.nb_sampler_set_logit_bias(h, ids, bias, len(items))
            if st != _lib.NB_OK:
                err = _lib.error(st, "logit_bias")
                L.nb_sampler_free(h)
                raise err
        return h

    def _prepare(self, prompt_ids, max_tokens, stop, sampling):
        """Check the arguments and make the generation's objects: (sequence, sampler,
        text step, prompt array, n_predict). Caller holds _busy and frees them."""
        L = _lib.lib()
        if max_tokens is not None and (not isinstance(max_tokens, int)
                                       or isinstance(max_tokens, bool)):
            raise TypeError(f"max_tokens must be an int or None, not {max_tokens!r}")
        if not prompt_ids:
            raise ValueError("the prompt is empty (no tokens)")
        if isinstance(stop, (str, bytes)):
            stop = [stop]
        stops = [s for s in (stop or []) if s]
        n_prompt = len(prompt_ids)
        # None or <= 0: up to the end of the context (llama-cpp-python's rule)
        n_predict = max_tokens if max_tokens and max_tokens > 0 else max(0, self._n_ctx - n_prompt)
        sampler = seq = text = None
        try:
            sampler = self._sampler(**sampling)
            text = _TextStep(self._tok, stops)
            qp = _lib.default_params("nb_sequence_default_params")
            qp.n_ctx = self._n_ctx
            qp.shift = 1 if self.context_shift else 0
            bos = self.info["bos_id"]
            qp.n_keep = 1 if bos >= 0 and prompt_ids[0] == bos else 0  # the CLI's --keep 0
            L.nb_ctx_clear_seq(self._ctx, 0)
            h = ctypes.c_void_p()
            _lib.check(L.nb_sequence_init(ctypes.byref(h), self._ctx, ctypes.byref(qp)),
                       "sequence")
            seq = h
        except BaseException:
            if text:
                text.free()
            if sampler:
                L.nb_sampler_free(sampler)
            raise
        arr = (ctypes.c_int32 * n_prompt)(*prompt_ids)
        return seq, sampler, text, arr, n_predict

    @staticmethod
    def _free(seq, sampler, text):
        L = _lib.lib()
        if text:
            text.free()
        if seq:
            L.nb_sequence_free(seq)
        if sampler:
            L.nb_sampler_free(sampler)

    def _generate(self, prompt_ids, max_tokens, stop, sampling):
        """Yield ("text", str) pieces as tokens are drawn, then ("end", finish_reason,
        n_generated). Runs nb_sequence_generate on a worker thread that waits for each
        token to be taken before it draws the next, so a stream is lazy and a stream
        left early (close, break) stops the library at once."""
        self._need_tok()
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("the model is busy with another generation (finish or close "
                               "that stream first)")
        seq = sampler = text = None
        worker = None
        handoff = queue.Queue()
        go_on = threading.Semaphore(0)
        state = {"stop": False}
        try:
            seq, sampler, text, arr, n_predict = self._prepare(prompt_ids, max_tokens, stop,
                                                               sampling)
            L = _lib.lib()

            def on_token(token, _user):
                handoff.put(("token", token))
                go_on.acquire()
                return 1 if state["stop"] else 0

            cb = _lib.nb_token_cb(on_token)
            stats = _lib.GenStats()

            def run():
                try:
                    st = L.nb_sequence_generate(seq, sampler, arr, len(prompt_ids), n_predict,
                                                1, cb, None, ctypes.byref(stats))
                    handoff.put(("done", st, None if st == _lib.NB_OK else _lib.error(st)))
                except BaseException as e:  # never leave the consumer waiting
                    handoff.put(("done", _lib.NB_ERR_INTERNAL, e))

            worker = threading.Thread(target=run, name="nibble-generate", daemon=True)
            worker.start()
            finish = None
            n_gen = 0
            while True:
                item = handoff.get()
                if item[0] == "done":
                    worker.join()
                    worker = None
                    if item[2] is not None:
                        raise item[2]
                    break
                n_gen += 1
                try:
                    ev, piece = text.feed(item[1])
                except BaseException:
                    state["stop"] = True
                    go_on.release()
                    raise
                if ev == _lib.NB_TEXT_EOG:
                    n_gen -= 1  # an end-of-turn token is not output
                    finish = "stop"
                elif ev == _lib.NB_TEXT_STOP:
                    finish = "stop"
                if ev != _lib.NB_TEXT_MORE:
                    state["stop"] = True
                if piece:
                    yield ("text", piece)
                go_on.release()
            if finish is None:
                tail = text.flush()
                if tail:
                    yield ("text", tail)
                finish = "stop" if stats.stopped_by == _lib.NB_STOPPED_EOG else "length"
            yield ("end", finish, n_gen)
        finally:
            if worker is not None:  # left early: the callback returns 1, the library stops
                state["stop"] = True
                go_on.release()
                worker.join()
            self._free(seq, sampler, text)
            self._busy.release()

    # ------------------------------------------------------------ embeddings

    def embed(self, input, pooling="mean"):
        """The embedding of `input` (str, or a list of token ids), or a list of them for a
        list of inputs: the last hidden states after the final norm, pooled ("mean",
        "last", "cls": the first token) and scaled to length 1 (nb_embed; as nibble serve's
        /v1/embeddings and llama-cpp-python's embed)."""
        L = _lib.lib()
        pool = L.nb_pooling_parse(_cstr(pooling)) if isinstance(pooling, str) else -1
        if pool < 0:
            raise ValueError("pooling must be 'mean', 'last' or 'cls'")
        one = isinstance(input, str) or (isinstance(input, (list, tuple)) and input and
                                          all(isinstance(t, int) for t in input))
        items = [input] if one else list(input)
        if not items:
            raise ValueError("embed: no input")
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("the model is busy with another generation (finish or close "
                               "its stream first)")
        try:
            out = []
            for item in items:
                ids = self._prompt_ids(item)
                n_embd = self.info["n_embd"]
                arr = (ctypes.c_int32 * max(1, len(ids)))(*ids)
                vec = (ctypes.c_float * n_embd)()
                _lib.check(L.nb_embed(self._ctx, 0, arr, len(ids), pool, vec), "embed")
                out.append(list(vec))
        finally:
            self._busy.release()
        return out[0] if one else out

    def create_embedding(self, input, model=None, pooling="mean"):
        """OpenAI's embeddings response for `input` (a str, a list of str, or token ids)."""
        items = [input] if isinstance(input, str) else list(input)
        if items and all(isinstance(t, int) for t in items):
            items = [items]
        vecs = self.embed(items, pooling=pooling)
        n = sum(len(self._prompt_ids(i)) for i in items)
        return {"object": "list",
                "data": [{"object": "embedding", "index": i, "embedding": v}
                         for i, v in enumerate(vecs)],
                "model": model or self.model_path,
                "usage": {"prompt_tokens": n, "total_tokens": n}}

    # ------------------------------------------------------------ completions

    def _prompt_ids(self, prompt):
        if isinstance(prompt, (list, tuple)):
            return [int(t) for t in prompt]
        self._need_tok()
        # as `nibble run -p` and llama-cpp-python: BOS first, special-token text parsed
        return self.tokenize(prompt, add_bos=True, special=True)

    def create_completion(self, prompt, max_tokens=16, temperature=0.8, top_p=0.95,
                          min_p=0.05, stop=None, stream=False, seed=None, top_k=40,
                          repeat_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0,
                          logit_bias=None, echo=False, logprobs=None):
        """Complete `prompt` (str, or a list of token ids). Returns an OpenAI-shaped
        "text_completion" dict, or with stream=True an iterator of its chunks (each a
        dict with the same keys, choices[0]["text"] the next piece; the last one carries
        finish_reason). temperature <= 0 is greedy. stop: a string or a list of them,
        left out of the text. max_tokens None or <= 0: to the end of the context."""
        if logprobs is not None:
            raise NotImplementedError("logprobs: not available through nibble's C API yet")
        self._need()
        ids = self._prompt_ids(prompt)
        sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                        repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                        frequency_penalty=frequency_penalty, seed=seed, logit_bias=logit_bias)
        cid = "cmpl-" + uuid.uuid4().hex
        created = int(time.time())
        head = ""
        if echo:
            head = prompt if isinstance(prompt, str) else self.detokenize(ids).decode(
                "utf-8", "replace")
        gen = self._generate(ids, max_tokens, stop, sampling)

        def chunk(text, finish):
            return {"id": cid, "object": "text_completion", "created": created,
                    "model": self.model_path,
                    "choices": [{"text": text, "index": 0, "logprobs": None,
                                 "finish_reason": finish}]}

        def usage(n_gen):
            return {"prompt_tokens": len(ids), "completion_tokens": n_gen,
                    "total_tokens": len(ids) + n_gen}

        if stream:
            def chunks():
                if head:
                    yield chunk(head, None)
                for item in gen:
                    if item[0] == "text":
                        yield chunk(item[1], None)
                    else:
                        last = chunk("", item[1])
                        last["usage"] = usage(item[2])
                        yield last
            return chunks()
        parts = [head]
        for item in gen:
            if item[0] == "text":
                parts.append(item[1])
            else:
                finish, n_gen = item[1], item[2]
        out = chunk("".join(parts), finish)
        out["usage"] = usage(n_gen)
        return out

    __call__ = create_completion

    # ------------------------------------------------------------ chat

    def _render_chat(self, messages):
        """The conversation as the model's chat template renders it, the assistant's
        header appended: the model's own Jinja template (nb_chat_template_render_json),
        a built-in family by name (chat_format: nb_chat_apply), or, when the model's
        template does not run here, the family it is recognised as (as `nibble chat`)."""
        self._need_tok()
        L = _lib.lib()
        if not isinstance(messages, (list, tuple)) or not messages:
            raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
        msgs = []
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise ValueError(f"each message needs a 'role' string: {m!r}")
            m = dict(m)
            content = m.get("content")
            if isinstance(content, list):  # OpenAI's parts: the text ones
                content = "".join(p.get("text", "") for p in content
                                  if isinstance(p, dict) and p.get("type") == "text")
            if content is None:
                content = ""
            if not isinstance(content, str):
                raise ValueError(f"a message's content must be a string: {m!r}")
            m["content"] = content
            msgs.append(m)

        def apply(name):
            arr = (_lib.ChatMsg * len(msgs))()
            keep = []
            for i, m in enumerate(msgs):
                r, c = m["role"].encode(), m["content"].encode()
                keep += [r, c]
                arr[i].role, arr[i].content = r, c
            return _lib.grow_text(lambda buf, size, ln: L.nb_chat_apply(
                self._tok, _cstr(name), arr, len(msgs), 1, buf, size, ln))

        if self.chat_format is not None:
            return apply(self.chat_format)
        ctx = json.dumps({"messages": msgs, "add_generation_prompt": True}).encode()
        try:
            return _lib.grow_text(lambda buf, size, ln: L.nb_chat_template_render_json(
                self._tok, None, ctx, buf, size, ln))
        except NibbleError as e:
            if e.status == _lib.NB_ERR_NOT_FOUND:
                raise NibbleError(f"{self.model_path} has no chat template: give "
                                  "Model(..., chat_format=NAME) (chatml, qwen3, llama3, "
                                  "llama2, gemma)", e.status, e.status_name) from None
            if e.status == _lib.NB_ERR_INVALID_ARG:
                raise  # the template refused the conversation (raise_exception)
        return apply(None)

    def create_chat_completion(self, messages, temperature=0.2, top_p=0.95, top_k=40,
                               min_p=0.05, stream=False, stop=None, seed=None,
                               max_tokens=None, presence_penalty=0.0, frequency_penalty=0.0,
                               repeat_penalty=1.0, logit_bias=None):
        """Answer a conversation (a list of {"role", "content"} dicts) with the model's
        chat template. Returns an OpenAI-shaped "chat.completion" dict, or with
        stream=True an iterator of "chat.completion.chunk" dicts (a first delta with the
        role, then content deltas, then an empty delta with finish_reason)."""
        prompt = self._render_chat(messages)
        ids = self.tokenize(prompt, add_bos=False, special=True)
        sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                        repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                        frequency_penalty=frequency_penalty, seed=seed, logit_bias=logit_bias)
        cid = "chatcmpl-" + uuid.uuid4().hex
        created = int(time.time())
        gen = self._generate(ids, max_tokens, stop, sampling)

        def usage(n_gen):
            return {"prompt_tokens": len(ids), "completion_tokens": n_gen,
                    "total_tokens": len(ids) + n_gen}

        if stream:
            def chunks():
                def chunk(delta, finish):
                    return {"id": cid, "object": "chat.completion.chunk", "created": created,
                            "model": self.model_path,
                            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}]}
                yield chunk({"role": "assistant"}, None)
                for item in gen:
                    if item[0] == "text":
                        yield chunk({"content": item[1]}, None)
                    else:
                        last = chunk({}, item[1])
                        last["usage"] = usage(item[2])
                        yield last
            return chunks()
        parts = []
        for item in gen:
            if item[0] == "text":
                parts.append(item[1])
            else:
                finish, n_gen = item[1], item[2]
        return {"id": cid, "object": "chat.completion", "created": created,
                "model": self.model_path,
                "choices": [{"index": 0,
                             "message": {"role": "assistant", "content": "".join(parts)},
                             "logprobs": None, "finish_reason": finish}],
                "usage": usage(n_gen)}
