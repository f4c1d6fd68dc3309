#!/usr/bin/env python3
"""bench/llamacpp_greedy.py — how many greedy continuations of a llama.cpp build match
llama.cpp's own run of the float model, on the prompts of a reference.json (the side of
issue 12's table that llama.cpp runs; nibble's side is `nibble eval`).

  bench/llamacpp_greedy.py LLAMA_BIN_DIR REFERENCE.json N F32.gguf BUILD.gguf...

llama.cpp is built outside the repository (docs/benchmarks.md); each prompt runs through
llama-completion with --temp 0 and -n N. Prints, per build, the continuations identical
to the f32 one (as text) and the mean index of the first differing character per prompt
in tokens of the f32 continuation is not available from text, so the count is the
measure; the texts go to stderr with -v.
"""
import json
import subprocess
import sys


def greedy(bindir, model, prompt, n):
    out = subprocess.run(
        [f"{bindir}/llama-completion", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0",
         "--no-display-prompt", "--no-warmup", "-t", "2", "-no-cnv", "--simple-io"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        sys.exit(f"llama-completion failed on {model}: {out.stderr[-400:]}")
    return out.stdout


def main():
    verbose = "-v" in sys.argv
    args = [a for a in sys.argv[1:] if a != "-v"]
    bindir, ref, n, f32, builds = args[0], args[1], int(args[2]), args[3], args[4:]
    cases = json.load(open(ref))["cases"]
    prompts = [c.get("prompt_text", c.get("text")) for c in cases]
    base = [greedy(bindir, f32, p, n) for p in prompts]
    print(f"| build | prompts | greedy identical to f32 ({n} tokens) |\n|---|---|---|")
    for b in builds:
        same = 0
        for p, want in zip(prompts, base):
            got = greedy(bindir, b, p, n)
            same += got == want
            if verbose:
                print(f"{b} {p!r}: {'same' if got == want else 'DIFFERS'}\n  f32: {want!r}\n"
                      f"  got: {got!r}", file=sys.stderr)
        print(f"| {b} | {len(prompts)} | {same}/{len(prompts)} |")


if __name__ == "__main__":
    main()
