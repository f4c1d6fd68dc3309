#!/usr/bin/env python3
"""tools/train_phone_agent.py — train phone-agent-tiny (issue 18) from a fixed seed.

The model that acts on nibble's simulated phone: a small Llama-architecture decoder trained
on trajectories of the scripted correct policy, and exported as GGUF f32 and as a Hugging
Face folder, both with the tokenizer and a ChatML chat template inside.

  1. data:      `nibble agent --dump-trajectories N --seed 1` (training steps, chat-format
                lines); held-out variants (seed 2) are never trained on, only measured.
  2. tokenizer: SentencePiece BPE with byte fallback (no dummy prefix, whitespace kept,
                digits split), `<|im_start|>` / `<|im_end|>` as control tokens.
  3. prompts:   rendered as the model's own chat template renders them (TEMPLATE below: the
                Qwen2.5 ChatML layout, Hermes tool calls) — part of the steps in the JSON
                action form (`--format json_object`), part in the tool-call form
                (`--format tools`: the six actions as tools, the reply
                `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`).
  4. training:  loss on the assistant reply (and its `<|im_end|>`) only. Every prompt of a
                form starts with the same system message, so each batch runs that shared
                prefix once and its rows attend to its keys and values (the gradient flows
                through it): the same function as running every row in full, at a fraction
                of the cost.
  5. export:    OUT/phone-agent-tiny-f32.gguf (architecture llama; Q/K rows permuted for
                interleaved-pair RoPE as llama.cpp's converter does) and OUT/hf/
                (config.json, model.safetensors F32 in the half-split RoPE layout,
                tokenizer.model, tokenizer_config.json with the chat template).

Needs python3-torch, python3-numpy, python3-sentencepiece (Debian). Runs on the CPU with
--threads threads (2) and prints its wall time. Usage:
  tools/train_phone_agent.py --nibble build/release/nibble --out models/phone-agent-tiny
"""
import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

IM_START, IM_END = "<|im_start|>", "<|im_end|>"

# The chat template the model is trained with and ships with (GGUF tokenizer.chat_template,
# tokenizer_config.json chat_template). Written for HF's trim_blocks/lstrip_blocks rules
# (every newline is an explicit string) so Jinja, nibble's interpreter and llama.cpp's
# render the same text; render() below is its Python twin.
TEMPLATE = (
    "{%- if tools %}\n"
    "{{- '<|im_start|>system\\n' }}\n"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}\n"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}\n"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}\n"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}\n"
    "{%- elif messages[0].role == 'system' %}\n"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for m in messages %}\n"
    "{%- if m.role == 'system' and loop.first %}\n"
    "{%- elif m.role == 'assistant' and m.tool_calls %}\n"
    "{{- '<|im_start|>assistant' }}\n"
    "{%- for tc in m.tool_calls %}\n"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + tc.function.name + '\", \"arguments\": ' }}\n"
    "{%- if tc.function.arguments is string %}{{- tc.function.arguments }}"
    "{%- else %}{{- tc.function.arguments | tojson }}{%- endif %}\n"
    "{{- '}\\n</tool_call>' }}\n"
    "{%- endfor %}\n"
    "{{- '<|im_end|>\\n' }}\n"
    "{%- elif m.role == 'tool' %}\n"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + m.content + '\\n</tool_response><|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n"
)

# The six actions as tools, as `nibble agent --format tools` sends them (app/cmd_agent.c).
TOOLS = [
    {"type": "function", "function": {"name": "tap", "description": "Tap an element marked * on the screen",
     "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}},
    {"type": "function", "function": {"name": "type", "description": "Type into the field tapped last",
     "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}},
    {"type": "function", "function": {"name": "back", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "home", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "scroll", "parameters": {"type": "object", "properties": {
        "direction": {"type": "string", "enum": ["up", "down"]}}, "required": ["direction"]}}},
    {"type": "function", "function": {"name": "task_complete", "description": "The task is done",
     "parameters": {"type": "object", "properties": {}}}},
]


def system_prefix(system, tools):
    """The rendered system turn (TEMPLATE's first part), ending with its newline."""
    if not tools:
        return IM_START + "system\n" + system + IM_END + "\n"
    s = IM_START + "system\n" + system + "\n\n# Tools\n\nYou may call one or more functions to assist " \
        "with the user query.\n\nYou are provided with function signatures within <tools></tools> " \
        "XML tags:\n<tools>"
    for t in TOOLS:
        s += "\n" + json.dumps(t)
    return s + "\n</tools>\n\nFor each function call, return a json object with function name and " \
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": " \
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>" + IM_END + "\n"


def reply_text(action_json, tools):
    """The assistant's reply: the action object as the loop reads it, or as one tool call."""
    if not tools:
        return action_json
    a = json.loads(action_json)
    name = a.pop("action")
    return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + json.dumps(a) + "}\n</tool_call>"


def turn_text(user):
    """The user turn and the generation prompt (TEMPLATE's render after the system turn)."""
    return IM_START + "user\n" + user + IM_END + "\n" + IM_START + "assistant\n"


class Tok:
    """SentencePiece pieces plus the two control tokens matched in text, as nibble and
    llama.cpp tokenize a rendered prompt (specials split the text; no dummy prefix)."""

    def __init__(self, path):
        self.sp = spm.SentencePieceProcessor(model_file=path)
        self.special = {IM_START: self.sp.piece_to_id(IM_START), IM_END: self.sp.piece_to_id(IM_END)}

    def encode(self, text):
        ids = []
        while text:
            cut = [(text.find(s), s) for s in self.special if text.find(s) >= 0]
            if not cut:
                ids += self.sp.encode(text)
                break
            pos, s = min(cut)
            if pos:
                ids += self.sp.encode(text[:pos])
            ids.append(self.special[s])
            text = text[pos + len(s):]
        return ids


def train_tokenizer(texts, prefix, vocab, seed):
    lines = []
    for t in texts:
        lines += [ln for ln in t.split("\n") if ln]
    random.Random(seed).shuffle(lines)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=prefix, model_type="bpe", vocab_size=vocab,
        byte_fallback=True, character_coverage=1.0, add_dummy_prefix=False,
        remove_extra_whitespaces=False, normalization_rule_name="identity", split_digits=True,
        split_by_whitespace=True, allow_whitespace_only_pieces=True, control_symbols=[IM_START, IM_END],
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=2, max_sentence_length=8192,
        minloglevel=2)
    return prefix + ".model"


# ---------------------------------------------------------------- the model (HF Llama layout)

class Model(torch.nn.Module):
    """A Llama decoder: RMSNorm, GQA attention with half-split RoPE, SwiGLU, tied output."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        d, hd = c["hidden_size"], c["head_dim"]
        nh, nkv, ff = c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
        self.embed = torch.nn.Embedding(c["vocab_size"], d)
        self.layers = torch.nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            m = torch.nn.Module()
            m.attn_norm = torch.nn.Parameter(torch.ones(d))
            m.q = torch.nn.Linear(d, nh * hd, bias=False)
            m.k = torch.nn.Linear(d, nkv * hd, bias=False)
            m.v = torch.nn.Linear(d, nkv * hd, bias=False)
            m.o = torch.nn.Linear(nh * hd, d, bias=False)
            m.ffn_norm = torch.nn.Parameter(torch.ones(d))
            m.gate = torch.nn.Linear(d, ff, bias=False)
            m.up = torch.nn.Linear(d, ff, bias=False)
            m.down = torch.nn.Linear(ff, d, bias=False)
            self.layers.append(m)
        self.norm = torch.nn.Parameter(torch.ones(d))
        std = 0.02
        for n, p in self.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, std)
            if n.endswith("o.weight") or n.endswith("down.weight"):
                torch.nn.init.normal_(p, 0.0, std / math.sqrt(2 * c["num_hidden_layers"]))
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.arange(c["max_position_embeddings"], dtype=torch.float64)[:, None] * inv[None]
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"]) * w

    def rope(self, x, pos0):
        # x [B, H, T, hd]; half-split pairs (i, i + hd/2) as HF's rotate_half
        t = x.shape[2]
        cos, sin = self.cos[pos0:pos0 + t], self.sin[pos0:pos0 + t]
        h = x.shape[-1] // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
        return x * cos + rot * sin

    def qkv(self, m, x, pos0):
        b, t, _ = x.shape
        hd, nh, nkv = self.c["head_dim"], self.c["num_attention_heads"], self.c["num_key_value_heads"]
        q = m.q(x).view(b, t, nh, hd).transpose(1, 2)
        k = m.k(x).view(b, t, nkv, hd).transpose(1, 2)
        v = m.v(x).view(b, t, nkv, hd).transpose(1, 2)
        rep = nh // nkv
        k, v = self.rope(k, pos0).repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        return self.rope(q, pos0), k, v

    def attend(self, q, k, v, mask):
        s = (q @ k.transpose(-1, -2).contiguous()) * (1.0 / math.sqrt(q.shape[-1]))
        s = s.masked_fill(~mask, float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
        b, h, t, hd = o.shape
        return o.transpose(1, 2).reshape(b, t, h * hd)

    def forward(self, prefix, ids):
        """Logits [B, T, V] of the rows ids [B, T], each continuing the shared prefix [P]."""
        p, (b, t) = prefix.shape[0], ids.shape
        hp, hb = self.embed(prefix)[None], self.embed(ids)
        mp = torch.ones(p, p, dtype=torch.bool).tril()
        mb = torch.cat([torch.ones(t, p, dtype=torch.bool), torch.ones(t, t, dtype=torch.bool).tril()], 1)
        last = len(self.layers) - 1
        for i, m in enumerate(self.layers):
            qp, kp, vp = self.qkv(m, self.rms(hp, m.attn_norm), 0)
            qb, kb, vb = self.qkv(m, self.rms(hb, m.attn_norm), p)
            k = torch.cat([kp.expand(b, -1, -1, -1), kb], 2)
            v = torch.cat([vp.expand(b, -1, -1, -1), vb], 2)
            hb = hb + m.o(self.attend(qb, k, v, mb))
            x = self.rms(hb, m.ffn_norm)
            hb = hb + m.down(F.silu(m.gate(x)) * m.up(x))
            if i < last:  # the prefix's last layer feeds nothing
                hp = hp + m.o(self.attend(qp, kp, vp, mp))
                x = self.rms(hp, m.ffn_norm)
                hp = hp + m.down(F.silu(m.gate(x)) * m.up(x))
        return self.rms(hb, self.norm) @ self.embed.weight.t()

    def hf_tensors(self):
        """name -> float32 array in the Hugging Face Llama layout."""
        out = {"model.embed_tokens.weight": self.embed.weight, "model.norm.weight": self.norm}
        names = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
                 "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
                 "down": "mlp.down_proj"}
        for i, m in enumerate(self.layers):
            pre = "model.layers.%d." % i
            out[pre + "input_layernorm.weight"] = m.attn_norm
            out[pre + "post_attention_layernorm.weight"] = m.ffn_norm
            for short, long in names.items():
                out[pre + long + ".weight"] = getattr(m, short).weight
        return {k: v.detach().float().numpy().copy() for k, v in out.items()}


# ---------------------------------------------------------------- data

def dump_trajectories(nibble, episodes, seed, path):
    """The scripted correct policy's steps on `episodes` variants of `seed`, as chat lines."""
    subprocess.run([nibble, "agent", "--dump-trajectories", str(episodes), "--seed", str(seed),
                    "--out", path], check=True)


def load_steps(path):
    steps = []
    for line in open(path, encoding="utf-8"):
        j = json.loads(line)
        m = j["messages"]
        assert [x["role"] for x in m] == ["system", "user", "assistant"], m
        steps.append((m[0]["content"], m[1]["content"], m[2]["content"], j["task"]))
    return steps


def encode_steps(tok, steps, tools_share, seed):
    """(form, ids, n_prompt) per step; form 0 = JSON action, 1 = tool call. The ids follow
    the form's system prefix; the last n - n_prompt ids (reply, <|im_end|>) carry the loss."""
    rng = random.Random(seed)
    out = []
    for system, user, action, _ in steps:
        form = 1 if rng.random() < tools_share else 0
        prompt = tok.encode(turn_text(user))
        reply = tok.encode(reply_text(action, form)) + [tok.special[IM_END]]
        out.append((form, prompt + reply, len(prompt)))
    return out


def batches(rows, batch_tokens, rng, chunk=4):
    """Batches of rows of one form, shuffled. Rows are drawn at random in chunks of about
    `chunk` batches, and a chunk is sorted by length before it is cut, so a batch pads little
    yet mixes tasks and steps (sorting the whole set made batches of one kind of screen)."""
    out = []
    for form in (0, 1):
        idx = [i for i, r in enumerate(rows) if r[0] == form]
        rng.shuffle(idx)
        mean = sum(len(rows[i][1]) for i in idx) / max(len(idx), 1)
        per = max(1, int(chunk * batch_tokens / max(mean, 1)))
        for c0 in range(0, len(idx), per):
            part = sorted(idx[c0:c0 + per], key=lambda i: len(rows[i][1]))
            cur = []
            for i in part:
                if cur and (len(cur) + 1) * len(rows[i][1]) > batch_tokens:
                    out.append(cur)
                    cur = []
                cur.append(i)
            if cur:
                out.append(cur)
    rng.shuffle(out)
    return out


def tensors(rows, idx, prompt_weight=0.0):
    """ids, targets and per-position loss weights. Targets: the reply's tokens, and with a
    `prompt_weight` the user turn's own tokens too (-100 elsewhere). Weights: 1 on the reply,
    `prompt_weight` on the user turn, divided by the batch's reply tokens, so the reply's
    gradient is the same with and without the prompt's added to it."""
    t = max(len(rows[i][1]) for i in idx)
    ids = torch.zeros(len(idx), t, dtype=torch.long)
    tgt = torch.full((len(idx), t), -100, dtype=torch.long)
    w = torch.zeros(len(idx), t)
    for r, i in enumerate(idx):
        seq, n_prompt = rows[i][1], rows[i][2]
        ids[r, :len(seq)] = torch.tensor(seq)
        # position j predicts token j + 1
        tgt[r, n_prompt - 1:len(seq) - 1] = torch.tensor(seq[n_prompt:])
        w[r, n_prompt - 1:len(seq) - 1] = 1.0
        if prompt_weight:
            tgt[r, :n_prompt - 1] = torch.tensor(seq[1:n_prompt])
            w[r, :n_prompt - 1] = prompt_weight
    return ids, tgt, w / sum(len(rows[i][1]) - rows[i][2] for i in idx)


KINDS = ("wifi", "bluetooth", "airplane", "dark_theme", "dnd", "location", "alarm_set",
         "alarm_off", "message", "unfavorite", "favorite")


COPY_KINDS = ("alarm_set", "message", "favorite", "unfavorite")


def step_kind(task):
    """The generator's task kind of a variant id (gen12_alarm_set_2350 -> alarm_set)."""
    k = task.split("_", 1)[1] if task.startswith("gen") else task
    return next((x for x in KINDS if k.startswith(x)), k)


def is_copy_step(step):
    """A step whose reply copies from the instruction: typing a time, a name or a text, or
    finding the named contact (tap it, or scroll to it)."""
    action = json.loads(step[2])
    return step_kind(step[3]) in COPY_KINDS and (
        action["action"] in ("type", "scroll") or action.get("id", "").startswith("contact_"))


def evaluate(model, prefixes, rows, idx_batches, kinds):
    """Teacher-forced: the share of replies whose every token is the argmax, the loss, and
    per kind (`kinds`: a tuple of kinds per row) [exact, rows]."""
    model.eval()
    exact = n = 0
    loss_sum = tok_n = 0.0
    per = {}
    with torch.no_grad():
        for idx in idx_batches:
            ids, tgt, _ = tensors(rows, idx)
            logits = model(prefixes[rows[idx[0]][0]], ids)
            mask = tgt != -100
            loss_sum += F.cross_entropy(logits[mask], tgt[mask], reduction="sum").item()
            tok_n += mask.sum().item()
            ok = ((logits.argmax(-1) == tgt) | ~mask).all(1).tolist()
            exact += sum(ok)
            n += len(idx)
            for i, o in zip(idx, ok):
                for k in kinds[i]:
                    e = per.setdefault(k, [0, 0])
                    e[0] += o
                    e[1] += 1
    model.train()
    return exact / max(n, 1), loss_sum / max(tok_n, 1), per


def kind_line(per):
    return " ".join("%s %d/%d" % (k, per[k][0], per[k][1]) for k in KINDS + ("copying",) if k in per)


# ---------------------------------------------------------------- export

def write_safetensors(path, tensors_):
    header, off, blobs = {}, 0, []
    for name in sorted(tensors_):
        a = np.ascontiguousarray(tensors_[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, kind, value):
    """One GGUF metadata pair; kind: u32, f32, bool, str, or arr_str / arr_f32 / arr_i32."""
    out = gguf_str(key)
    if kind == "u32":
        return out + struct.pack("<II", 4, value)
    if kind == "f32":
        return out + struct.pack("<If", 6, value)
    if kind == "bool":
        return out + struct.pack("<IB", 7, 1 if value else 0)
    if kind == "str":
        return out + struct.pack("<I", 8) + gguf_str(value)
    if kind == "arr_str":
        return out + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(gguf_str(s) for s in value)
    if kind == "arr_f32":
        return out + struct.pack("<IIQ", 9, 6, len(value)) + struct.pack("<%df" % len(value), *value)
    if kind == "arr_i32":
        return out + struct.pack("<IIQ", 9, 5, len(value)) + struct.pack("<%di" % len(value), *value)
    raise ValueError(kind)


def permute_rope(w, n_head):
    """HF half-split rows -> interleaved pairs (llama.cpp's llama GGUF layout)."""
    r = w.shape[0] // n_head // 2
    return w.reshape(n_head, 2, r, -1).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, c, hf, sp_path, name):
    sp = spm.SentencePieceProcessor(model_file=sp_path)
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1)
    im_end = sp.piece_to_id(IM_END)
    kv = [
        gguf_kv("general.architecture", "str", "llama"),
        gguf_kv("general.name", "str", name),
        gguf_kv("general.file_type", "u32", 0),
        gguf_kv("llama.context_length", "u32", c["max_position_embeddings"]),
        gguf_kv("llama.embedding_length", "u32", c["hidden_size"]),
        gguf_kv("llama.block_count", "u32", c["num_hidden_layers"]),
        gguf_kv("llama.feed_forward_length", "u32", c["intermediate_size"]),
        gguf_kv("llama.attention.head_count", "u32", c["num_attention_heads"]),
        gguf_kv("llama.attention.head_count_kv", "u32", c["num_key_value_heads"]),
        gguf_kv("llama.rope.dimension_count", "u32", c["head_dim"]),
        gguf_kv("llama.rope.freq_base", "f32", c["rope_theta"]),
        gguf_kv("llama.attention.layer_norm_rms_epsilon", "f32", c["rms_norm_eps"]),
        gguf_kv("llama.vocab_size", "u32", c["vocab_size"]),
        gguf_kv("tokenizer.ggml.model", "str", "llama"),
        gguf_kv("tokenizer.ggml.tokens", "arr_str", tokens),
        gguf_kv("tokenizer.ggml.scores", "arr_f32", scores),
        gguf_kv("tokenizer.ggml.token_type", "arr_i32", types),
        gguf_kv("tokenizer.ggml.unknown_token_id", "u32", 0),
        gguf_kv("tokenizer.ggml.bos_token_id", "u32", 1),
        gguf_kv("tokenizer.ggml.eos_token_id", "u32", im_end),
        gguf_kv("tokenizer.ggml.eot_token_id", "u32", im_end),
        gguf_kv("tokenizer.ggml.add_bos_token", "bool", False),
        gguf_kv("tokenizer.ggml.add_eos_token", "bool", False),
        gguf_kv("tokenizer.ggml.add_space_prefix", "bool", False),
        gguf_kv("tokenizer.chat_template", "str", TEMPLATE),
    ]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    t = [("token_embd.weight", hf["model.embed_tokens.weight"])]
    gg = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
          "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
          "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
          "post_attention_layernorm": "ffn_norm"}
    for i in range(c["num_hidden_layers"]):
        for long, short in gg.items():
            w = hf["model.layers.%d.%s.weight" % (i, long)]
            if short == "attn_q":
                w = permute_rope(w, nh)
            elif short == "attn_k":
                w = permute_rope(w, nkv)
            t.append(("blk.%d.%s.weight" % (i, short), w))
    t.append(("output_norm.weight", hf["model.norm.weight"]))
    align = 32
    infos, off = b"", 0
    for n, a in t:
        infos += gguf_str(n) + struct.pack("<I", a.ndim)
        infos += b"".join(struct.pack("<Q", d) for d in reversed(a.shape))
        infos += struct.pack("<IQ", 0, off)  # F32
        off += (a.nbytes + align - 1) // align * align
    head = b"GGUF" + struct.pack("<IQQ", 3, len(t), len(kv)) + b"".join(kv) + infos
    with open(path, "wb") as f:
        f.write(head)
        f.write(b"\0" * ((align - len(head) % align) % align))
        for _, a in t:
            b = np.ascontiguousarray(a, dtype="<f4").tobytes()
            f.write(b)
            f.write(b"\0" * ((align - len(b) % align) % align))


def write_hf(d, c, hf, sp_path, im_end_id):
    os.makedirs(d, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": c["hidden_size"], "intermediate_size": c["intermediate_size"],
           "num_attention_heads": c["num_attention_heads"],
           "num_key_value_heads": c["num_key_value_heads"],
           "num_hidden_layers": c["num_hidden_layers"], "vocab_size": c["vocab_size"],
           "rms_norm_eps": c["rms_norm_eps"], "rope_theta": c["rope_theta"],
           "max_position_embeddings": c["max_position_embeddings"], "tie_word_embeddings": True,
           "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": im_end_id,
           "torch_dtype": "float32", "attention_bias": False, "mlp_bias": False,
           "head_dim": c["head_dim"]}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    tcfg = {"add_bos_token": False, "add_eos_token": False, "bos_token": "<s>",
            "eos_token": IM_END, "unk_token": "<unk>", "pad_token": IM_END,
            "additional_special_tokens": [IM_START, IM_END],
            "model_max_length": c["max_position_embeddings"], "tokenizer_class": "LlamaTokenizer",
            "legacy": False, "chat_template": TEMPLATE}
    json.dump(tcfg, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=2)
    with open(sp_path, "rb") as f, open(os.path.join(d, "tokenizer.model"), "wb") as g:
        g.write(f.read())
    write_safetensors(os.path.join(d, "model.safetensors"), hf)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nibble", default="build/release/nibble")
    ap.add_argument("--out", default="models/phone-agent-tiny")
    ap.add_argument("--work", default="/tmp/phone-agent-train")
    ap.add_argument("--episodes", type=int, default=3000, help="training variants (seed 1)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tools-share", type=float, default=0.25)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--epochs", type=float, default=3.0)
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--copy-repeat", type=int, default=1,
                    help="steps of the kinds that copy from the instruction, N times an epoch")
    ap.add_argument("--copy-episodes", type=int, default=0,
                    help="extra variants (seed 3) of which only the copying steps are trained on: "
                    "a typed time, name or text, a contact to tap or to scroll to")
    ap.add_argument("--prompt-loss", type=float, default=0.0,
                    help="weight of a language-model loss on the user turn's tokens (task, "
                    "screen, previous actions) beside the reply's (0: reply only)")
    ap.add_argument("--eval-every", type=int, default=500,
                    help="teacher-forced held-out check every N steps (0: at the end only)")
    ap.add_argument("--bf16", type=int, default=1,
                    help="1: matrix products in bfloat16 (CPU autocast; float32 weights), 0: float32")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop after this much training time (0: no limit); the learning rate "
                         "then decays by the clock when that comes before the last step")
    ap.add_argument("--stats-only", action="store_true", help="data and tokenizer, then stop")
    ap.add_argument("--init", default="",
                    help="start from these weights (a checkpoint.pt) instead of random ones")
    ap.add_argument("--export-only", action="store_true",
                    help="no training: export WORK/checkpoint.pt (a finished run's weights) again")
    a = ap.parse_args()
    t0 = time.time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.makedirs(a.work, exist_ok=True)

    train_path = os.path.join(a.work, "train.jsonl")
    held_path = os.path.join(a.work, "heldout.jsonl")
    # a work folder of an earlier run (--init, --export-only) keeps its data and tokenizer
    if not os.path.exists(train_path):
        dump_trajectories(a.nibble, a.episodes, a.seed, train_path)
        dump_trajectories(a.nibble, 100, 2, held_path)
    steps, held = load_steps(train_path), load_steps(held_path)
    systems = {s[0] for s in steps}
    assert len(systems) == 1, "one system message expected"
    system = steps[0][0]

    texts = [system_prefix(system, 1).replace(IM_START, "").replace(IM_END, "")]
    for s in steps:
        texts += [s[1], reply_text(s[2], 0), reply_text(s[2], 1)]
    sp_path = os.path.join(a.work, "tok.model")
    if not os.path.exists(sp_path):
        sp_path = train_tokenizer(texts, os.path.join(a.work, "tok"), a.vocab, a.seed)
    tok = Tok(sp_path)
    prefixes = [torch.tensor(tok.encode(system_prefix(system, f))) for f in (0, 1)]
    rows = encode_steps(tok, steps, a.tools_share, a.seed)
    if a.copy_repeat > 1:
        # the kinds whose replies copy words or digits from the instruction (a time, a
        # contact, a message) are the last learnt: their steps appear copy_repeat times
        copy = [r for s, r in zip(steps, rows) if step_kind(s[3]) in COPY_KINDS]
        rows += copy * (a.copy_repeat - 1)
        print("copy kinds (%s): %d steps x %d" % (", ".join(COPY_KINDS), len(copy), a.copy_repeat),
              flush=True)
    if a.copy_episodes:
        # a model that copies by a learnt lookup needs many copies to see: the steps whose
        # reply depends on a word or digit of the instruction, from variants of another seed
        # (named by N: another N in the same work folder is another file, not a stale one)
        copy_path = os.path.join(a.work, "copy-%d.jsonl" % a.copy_episodes)
        if not os.path.exists(copy_path):
            dump_trajectories(a.nibble, a.copy_episodes, 3, copy_path)
        extra = [s for s in load_steps(copy_path) if is_copy_step(s)]
        rows += encode_steps(tok, extra, a.tools_share, a.seed + 2)
        print("copying steps of %d more variants (seed 3): %d" % (a.copy_episodes, len(extra)),
              flush=True)
    hrows = encode_steps(tok, held, 0.5, a.seed + 1)
    # per kind, and the copying steps of all kinds together
    hkinds = [(step_kind(h[3]),) + (("copying",) if is_copy_step(h) else ()) for h in held]
    lens = [len(r[1]) for r in rows]
    print("data: %d steps (%d tool-call form), prefix %d / %d tokens, rows %.1f tokens on average "
          "(%d at most), %d reply tokens; held-out %d steps" %
          (len(rows), sum(r[0] for r in rows), len(prefixes[0]), len(prefixes[1]),
           sum(lens) / len(lens), max(lens), sum(len(r[1]) - r[2] for r in rows), len(hrows)),
          flush=True)
    if a.stats_only:
        return

    c = {"hidden_size": a.hidden, "intermediate_size": a.ffn, "num_attention_heads": a.heads,
         "num_key_value_heads": a.kv_heads, "num_hidden_layers": a.layers, "vocab_size": a.vocab,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": a.ctx,
         "head_dim": a.hidden // a.heads}
    model = Model(c)
    ckpt = os.path.join(a.work, "checkpoint.pt")
    if a.init:
        model.load_state_dict(torch.load(a.init))
    if a.export_only:
        model.load_state_dict(torch.load(ckpt))
        a.epochs = 0
    n_params = sum(p.numel() for p in model.parameters())
    print("model: %d layers, hidden %d, %d/%d heads, ffn %d, vocab %d: %.2f M parameters" %
          (a.layers, a.hidden, a.heads, a.kv_heads, a.ffn, a.vocab, n_params / 1e6), flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": other, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.98))
    rng = random.Random(a.seed)
    per_epoch = len(batches(rows, a.batch_tokens, random.Random(0)))
    total = int(per_epoch * a.epochs)
    warm = min(100, total // 10)
    hb = batches(hrows, a.batch_tokens, random.Random(0))
    print("training: %d steps (%d a epoch), lr %g" % (total, per_epoch, a.lr), flush=True)
    t_train, step, plan = time.time(), 0, []
    stopped = False
    while step < total and not stopped:
        if not plan:
            plan = batches(rows, a.batch_tokens, rng)
        idx = plan.pop()
        # the cosine follows the steps, or the clock when --max-minutes ends the run first
        frac = step / total
        if a.max_minutes:
            frac = max(frac, (time.time() - t_train) / (a.max_minutes * 60))
        lr = a.lr * min(1.0, (step + 1) / max(warm, 1)) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, tgt, w = tensors(rows, idx, a.prompt_loss)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(a.bf16)):
            logits = model(prefixes[rows[idx[0]][0]], ids)
        ce = F.cross_entropy(logits.float().reshape(-1, a.vocab), tgt.reshape(-1), ignore_index=-100,
                             reduction="none")
        loss = (ce * w.reshape(-1)).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        el = time.time() - t_train
        if step % 20 == 0 or step == total:
            print("step %d/%d loss %.4f lr %.2e %.0fs" % (step, total, loss.item(), lr, el), flush=True)
        if a.eval_every and step % a.eval_every == 0 and step < total:
            ex, hl, per = evaluate(model, prefixes, hrows, hb, hkinds)
            print("  held-out (seed 2) steps: %.1f%% replies exact, loss %.4f; %s" %
                  (100 * ex, hl, kind_line(per)), flush=True)
        if a.max_minutes and el > a.max_minutes * 60:
            print("stopped at %.0f s (--max-minutes)" % el, flush=True)
            stopped = True
    train_s = time.time() - t_train
    if not a.export_only:
        torch.save(model.state_dict(), ckpt)
    ex, hl, per = evaluate(model, prefixes, hrows, hb, hkinds)
    print("held-out (seed 2) steps: %.1f%% replies exact, loss %.4f; %s" % (100 * ex, hl, kind_line(per)),
          flush=True)

    os.makedirs(a.out, exist_ok=True)
    hf = model.hf_tensors()
    write_gguf(os.path.join(a.out, "phone-agent-tiny-f32.gguf"), c, hf, sp_path, "phone-agent-tiny")
    write_hf(os.path.join(a.out, "hf"), c, hf, sp_path, tok.special[IM_END])
    info = {"steps": step, "train_seconds": round(train_s, 1), "wall_seconds": round(time.time() - t0, 1),
            "parameters": n_params, "heldout_reply_exact": round(ex, 4), "heldout_loss": round(hl, 4),
            "args": vars(a)}
    json.dump(info, open(os.path.join(a.work, "train_info.json"), "w"), indent=2)
    print("wall time %.1f s (training %.1f s, %d steps); wrote %s" %
          (time.time() - t0, train_s, step, a.out), flush=True)


if __name__ == "__main__":
    main()
