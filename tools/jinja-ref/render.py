#!/usr/bin/python3
"""Reference renderer for chat templates: renders conversation fixtures with a
model's own Jinja chat template, in the environment Hugging Face transformers
uses for apply_chat_template (the one vLLM and SGLang use to build prompts):

  - jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
    lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
  - a tojson filter that is json.dumps(x, ensure_ascii=False) with default
    separators and key order kept (no sorting, no HTML escaping), unlike
    Jinja's built-in tojson
  - raise_exception(msg) and strftime_now(fmt) globals

Usage: render.py [--bench N] TEMPLATE FIXTURE.json [FIXTURE.json ...]

TEMPLATE is a tokenizer_config.json (its "chat_template" is used) or a plain
.jinja file. Each fixture is a JSON object with "messages" and optional
"tools", "add_generation_prompt" and "enable_thinking"; every other key is
ignored. Prints one JSON object mapping each fixture path to its rendered
text, or exits 1 with one line on stderr. With --bench N, it renders each
fixture N times (after one warm-up render) and prints the mean seconds per
render instead of the text: the Jinja anchor of the Go benchmarks.

Needs Debian's python3-jinja2 (apt-get install -y python3-jinja2); run it with
/usr/bin/python3, not a pyenv python without jinja2.
"""
import json
import sys
import time
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def load_template(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        text = json.loads(text)["chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(text)


def render(template, fixture):
    kwargs = {
        "messages": fixture["messages"],
        "tools": fixture.get("tools"),
        "add_generation_prompt": fixture.get("add_generation_prompt", False),
        # The special tokens transformers passes to every template.
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
    }
    if "enable_thinking" in fixture:
        kwargs["enable_thinking"] = fixture["enable_thinking"]
    return template.render(**kwargs)


def main(argv):
    bench = 0
    if len(argv) > 2 and argv[1] == "--bench":
        try:
            bench = int(argv[2])
        except ValueError:
            bench = 0
        if bench <= 0:
            print("render.py: --bench needs a positive count", file=sys.stderr)
            return 1
        argv = argv[:1] + argv[3:]
    if len(argv) < 3:
        print("render.py: usage: render.py [--bench N] TEMPLATE FIXTURE.json [FIXTURE.json ...]", file=sys.stderr)
        return 1
    try:
        template = load_template(argv[1])
        out = {}
        for path in argv[2:]:
            with open(path, encoding="utf-8") as f:
                fixture = json.load(f)
            out[path] = render(template, fixture)
            if bench:
                start = time.perf_counter()
                for _ in range(bench):
                    render(template, fixture)
                out[path] = (time.perf_counter() - start) / bench
    except Exception as e:  # one line, whatever went wrong
        print("render.py: %s: %s" % (type(e).__name__, str(e).replace("\n", " ")), file=sys.stderr)
        return 1
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
