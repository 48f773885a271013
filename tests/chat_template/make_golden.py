#!/usr/bin/env python3
"""Regenerates the chat-template golden files the C++ tests compare against, byte for byte.

    pip install transformers jinja2   # no torch needed for tokenize=False
    python3 tests/chat_template/make_golden.py

Writes tests/chat_template/golden/{qwen2.5,mistral-v0.3,tinyllama,llama31-style}.json (real
templates rendered by `tokenizer.apply_chat_template(..., tokenize=False)`) and
golden/jinja_snippets.json (small templates rendered by the Jinja environment transformers
compiles chat templates in). strftime_now is pinned to 26 Jul 2024 by patching the `datetime`
that transformers' strftime_now reads; the C++ side passes date_override "26 Jul 2024".
"""
import copy
import datetime as _dt
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import jinja2  # noqa: E402
import transformers  # noqa: E402
import transformers.utils.chat_template_utils as ctu  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "data", "tokenizers")
OUT = os.path.join(HERE, "golden")
DATE = "26 Jul 2024"


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2024, 7, 26, 10, 30, 0)


ctu.datetime = _FixedDatetime  # what transformers' strftime_now calls

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["location"],
            },
            "return": {"type": "number", "description": "Temperature"},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web — returns snippets «like this»",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
]

TRICKY = "Line 1\nLine 2 {{ not_a_var }} {% if x %}{# c #} ünïcödé 😀 \"dq\" 'sq' \\ back\ttab\u2028  "

CALL = {"id": "call12345", "type": "function",
        "function": {"name": "get_current_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}}}

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello!"}],
    "system_multi_turn": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ],
    "tricky_content": [
        {"role": "system", "content": "  Be careful:\n{{ system }}  "},
        {"role": "user", "content": TRICKY},
        {"role": "assistant", "content": " Échappé « ok » 中文 "},
        {"role": "user", "content": "{% raw %}{{ x }}{% endraw %}\n\n"},
    ],
    "tool_call_and_result": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_current_weather", "content": "22.0"},
        {"role": "assistant", "content": "It is 22 °C in Paris."},
        {"role": "user", "content": "Thanks"},
    ],
    "tool_result_dict_content": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call12345", "content": {"temperature": 22, "sky": "clear", "ok": True, "x": None}},
    ],
    "parallel_tool_calls_json_string_args": [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call00001", "type": "function", "function": {"name": "get_current_weather", "arguments": "{\"location\": \"Paris\"}"}},
            {"id": "call00002", "type": "function", "function": {"name": "get_current_weather", "arguments": {"location": "Rome"}}},
        ]},
        {"role": "tool", "tool_call_id": "call00001", "content": "20"},
        {"role": "tool", "tool_call_id": "call00002", "content": "25"},
    ],
    "content_parts": [
        {"role": "user", "content": [{"type": "text", "text": "Describe"}, {"type": "text", "text": "this"}]},
    ],
    "alternation_violation": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ],
    "bad_tool_call_id": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [dict(CALL, id="short")]},
        {"role": "tool", "tool_call_id": "short", "content": "1"},
        {"role": "assistant", "content": "ok"},
    ],
    "unknown_role": [{"role": "developer", "content": "x"}, {"role": "user", "content": "y"}],
    "assistant_last": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "  Hello there.  "},
    ],
    "empty_system": [{"role": "system", "content": ""}, {"role": "user", "content": "Hi"}],
    "reasoning_field": [
        {"role": "user", "content": "Think"},
        {"role": "assistant", "content": "Done", "reasoning_content": "hmm"},
        {"role": "user", "content": "ok"},
    ],
}

# name -> (tokenizer dir, chat template override or None, extra apply kwargs, note)
TEMPLATES = {
    "qwen2.5": ("qwen2.5", None, {}, "tokenizer_config.json of tokenizers/qwen2.5"),
    "mistral-v0.3": ("mistral-7b-instruct-v0.3", None, {}, "tokenizer_config.json of tokenizers/mistral-7b-instruct-v0.3"),
    # transformers 5 cannot build TinyLlama's tokenizer.json here (old merges layout), so its
    # template runs on the Mistral tokenizer object, which has the same special tokens
    # (<s>, </s>, <unk>); TinyLlama's pad_token </s> is passed as a kwarg.
    "tinyllama": ("mistral-7b-instruct-v0.3", "tinyllama", {"pad_token": "</s>"},
                  "chat_template of tokenizers/tinyllama/tokenizer_config.json"),
    "llama31-style": ("llama3", "llama31_style.jinja", {}, "tests/chat_template/llama31_style.jinja (not Meta's file)"),
}

LLAMA_EXTRA = [
    ("builtin_tools", {"builtin_tools": ["brave_search", "wolfram_alpha"]}),
    ("tools_in_system", {"tools_in_user_message": False}),
    ("date_string", {"date_string": "01 Jan 2025"}),
]


def error_of(e):
    return {"type": type(e).__name__, "message": str(e)}


def render_case(tok, template, messages, add_gen, tools, extra):
    try:
        return {"expected": tok.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools),
                                                    add_generation_prompt=add_gen, tokenize=False,
                                                    chat_template=template, **extra)}
    except Exception as e:  # the template's own raise_exception, or a TypeError it hits
        return {"error": error_of(e)}


def real_template_golden(name):
    tok_dir, override, kwargs, note = TEMPLATES[name]
    tok = AutoTokenizer.from_pretrained(os.path.join(DATA, tok_dir))
    template = None
    if override == "tinyllama":
        with open(os.path.join(DATA, "tinyllama", "tokenizer_config.json"), encoding="utf-8") as f:
            template = json.load(f)["chat_template"]
    elif override:
        with open(os.path.join(HERE, override), encoding="utf-8") as f:
            template = f.read()
    special = dict(tok.special_tokens_map)
    special.update(kwargs)
    cases = []
    extras = [("", {})] + (LLAMA_EXTRA if name == "llama31-style" else [])
    for conv_name, messages in CONVERSATIONS.items():
        for tools_name, tools in (("", None), ("tools", TOOLS)):
            for add_gen in (True, False):
                for extra_name, extra in extras:
                    if extra_name and (conv_name not in ("system_multi_turn", "tool_call_and_result")):
                        continue
                    case = {"name": "/".join(p for p in (conv_name, tools_name, "gen" if add_gen else "nogen", extra_name) if p),
                            "messages": messages, "tools": tools, "add_generation_prompt": add_gen,
                            "extra": extra}
                    case.update(render_case(tok, template, messages, add_gen, tools, {**kwargs, **extra}))
                    cases.append(case)
    return {
        "generator": "tests/chat_template/make_golden.py",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "template_source": note,
        "template_file": override if override and override.endswith(".jinja") else None,
        "tokenizer_config": os.path.join(tok_dir if override is None else override, "tokenizer_config.json")
        if override in (None, "tinyllama") else None,
        "special_tokens": special,
        "date": DATE,
        "cases": cases,
    }


# Small templates exercising Jinja semantics one at a time: (template, variables).
SNIPPETS = [
    ("{% for i in [1,2,3] %}{% if i == 2 %}{% set y = i %}{% endif %}{{ y }},{% endfor %}", {}),
    ("{% set x = 5 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}|{{ x }}", {}),
    ("{% if true %}{% set a = 1 %}{% endif %}{{ a }}", {}),
    ("{{ 'a' in u }}|{{ u|first }}|{{ u ~ 'a' }}|{{ u|length }}|{{ u|trim }}|{{ u|list }}|{{ u is defined }}", {}),
    ("{{ u|int }}", {}), ("{{ u.x }}", {}), ("{{ u + 'a' }}", {}), ("{{ x.y.z }}", {"x": {}}),
    ("{{ u|tojson }}", {}), ("{{ 'a' + 1 }}", {}), ("{{ 1 < 'a' }}", {}), ("{{ 1/0 }}", {}),
    ("{{ d }}", {"d": {"a": [1, 2.0, None, True, "x'y", 'q"', "a'b\"c", "tab\tnl\n\x01é\u2028"], "b": [1, 2]}}),
    ("{{ 1e-5 }} {{ 1e16 }} {{ 1.5e15 }} {{ 0.1+0.2 }} {{ 3/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 2**-1 }}", {}),
    ("{{ 10 // 3 }} {{ -10 // 3 }} {{ 10 % -3 }} {{ 7.5 // 2 }} {{ 7.5 % 2 }} {{ 2 ** -2 }} {{ 0 ** 0 }} {{ 10 / 4 }} {{ -0.0 }} {{ 1e22 }} {{ 123456789012345678.0 }} {{ -1.5e-7 }} {{ 1/3 }}", {}),
    ("{{ x|tojson }}", {"x": {"b": 1, "a": [1.0, "é\u2028\x7f\x01\"\\/", None, True, 1e100, -0.5]}}),
    ("{{ x|tojson(indent=2) }}|{{ x|tojson(indent=4) }}", {"x": {"b": 1, "a": [], "c": {}, "d": [1, {"e": 2}]}}),
    ("{{ x|tojson(true) }}|{{ x|tojson(false, 2) }}|{{ x|tojson(sort_keys=true) }}|{{ x|tojson(separators=(',',':')) }}|{{ x|tojson(indent='\t') }}", {"x": {"b": [1, "é😀"], "a": None}}),
    ("{{ 'abc'[::-1] }} {{ 'héllo'|length }} {{ 'héllo'[1:3] }} {{ [1,2,3][-1] }} {{ [1,2,3][5] }}|{{ 'Hello'[1:] }}{{ 'Hello'[-2:] }}{{ [1,2,3,4][::2] }}{{ [1,2,3,4][3:0:-1] }}{{ 'héllo'[-1] }}{{ [1,2,3][:-1] }}{{ 'ab'[10:] }}", {}),
    ("{{ '  a b  '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'aXbXc'.split('X', 1) }} {{ 'a b  c'.rsplit(None, 1) }} {{ 'x\\ny\\r\\nz'.splitlines() }}", {}),
    ("{{ 'abc'.find('c') }} {{ 'aaa'.count('a') }} {{ '-'.join(['a','b']) }} {{ 'abc'.startswith(('x','a')) }} {{ 'abc'.endswith('bc') }} {{ ' x '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a b'.title() }} {{ 'héllo wörld'.upper() }} {{ 'ÀB'.lower() }} {{ 'hello'.capitalize() }} {{ 'a-b'.replace('-', '+') }}", {}),
    ("{{ x.items is callable }} {{ (x.items)()|list }}", {"x": {"items": 1}}),
    ("{{ x['items'] }} {{ x.get('items') }} {{ x.get('nope', 'dflt') }} {{ x.get('nope') }} {{ x.keys()|list }} {{ x.values()|list }}", {"x": {"items": 1, "b": 2}}),
    ("{% for k, v in x.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in x|items %}{{ k }}{{ v }}{% endfor %}{% for k in x %}{{ k }}{% endfor %}", {"x": {"b": 1, "a": 2}}),
    ("{% for i in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('x', 'y') }}|{% endfor %}", {}),
    ("{% for x in [] %}a{% else %}empty{% endfor %}{% for x in u %}a{% else %}e2{% endfor %}", {}),
    ("{% for x in [1,2,3,4,5] if x is odd %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}", {}),
    ("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% if x==3 %}{% break %}{% endif %}{% endfor %}", {}),
    ("{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("{% for x in none %}{% endfor %}", {}), ("{% for x in 3 %}{% endfor %}", {}),
    ("{{ none }} {{ None }} {{ true }} {{ True }} {{ (1, 2) }} {{ 1, 2 }} {{ [] }} {{ {} }} {{ (1,) }} {{ () }}", {}),
    ("a\n{%- if true %}\n  b  \n  {% endif %}\n  c\n", {}),
    ("  {% if true %}\nx{% endif %}  \n{# c #}\n  {#- c #}y\n", {}),
    ("a  {{- 'b' -}}  c {%+ if true +%}\n d{% endif %}", {}),
    ("x\n  {% raw %}{{ y }}{% endraw %}\n z", {}),
    ("line1\r\nline2\r{{ 'x' }}\r\n", {}),
    ("\t{% for i in [1] %}\n\t\t{{ i }}\n\t{% endfor %}\n", {}),
    ("{{ 'x' -}}\n\n  {{ 'y' }}  {#- comment -#}  z\n\n", {}),
    ("{%- set a = 1 -%}\n  {{ a }}  \n{%- set b = 2 %}\n{{ b }}", {}),
    ("{{ 'x'|upper }}{{ 'ßé'|upper }}{{ 'ÉA'|lower }}{{ 'hello WORLD'|capitalize }}{{ 'hello world'|title }}{{ \"they're bill\"|title }}{{ 'a-b c(d'|title }}", {}),
    ("{{ x|string }} {{ x.content|string }} {{ 5|string }} {{ none|string }}", {"x": {"content": "a"}}),
    ("{{ 'a\\nb\\tc\\x41\\u00e9\\101\\d\\'\\\"' }}{{ \"a\" 'b' }}", {}),
    ("{{ [3,1,2]|sort }} {{ [1,2]|join(',') }} {{ [1,[2]]|string }} {{ 1.0|int }} {{ '12'|int }} {{ 'x'|int }} {{ '1.5'|float }} {{ ' 42 '|int }} {{ '0x1A'|int(0, 16) }} {{ 'x'|float(1.5) }} {{ true|int }}", {}),
    ("{{ 5 is divisibleby 5 }} {{ 'a' is string }} {{ {} is mapping }} {{ 'a' is iterable }} {{ 1 is number }} {{ true is number }} {{ none is none }} {{ u is undefined }} {{ u is iterable }} {{ u is sequence }} {{ 1 is iterable }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 2 is odd }} {{ 2 is even }} {{ 3 is eq 3 }} {{ 3 is ne 3 }} {{ 2 is lt 3 }} {{ 'a' is in 'abc' }} {{ 1 is sameas 1 }} {{ none is sameas none }}", {}),
    ("{{ raise_exception('boom: ' ~ 42) }}", {}),
    ("{{ 'a' if false }}|{{ 'a' if true }}|{{ 'a' if 0 else 'b' }}", {}),
    ("{{ 1 == 1.0 }} {{ true == 1 }} {{ [1] == [1.0] }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 2**3**2 }} {{ -2**2 }} {{ not 1 == 2 }} {{ {'a': 1} == {'a': 1} }} {{ (1, 2) == [1, 2] }}", {}),
    ("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ 'a' * 0 }}|{{ 'a' * -1 }}|{{ 3 * 'x' }}", {}),
    ("{{ range(3)|list }} {{ range(1,10,3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}", {}),
    ("{{ range(100001)|length }}", {}),
    ("{{ x|selectattr('a')|list }} {{ x|selectattr('a','equalto',2)|list }} {{ x|map(attribute='a')|list }} {{ x|rejectattr('a')|list }} {{ x|map(attribute='a', default=7)|list }} {{ x|selectattr('b', 'defined')|list }}", {"x": [{"a": 0}, {"a": 2}, {"b": 1}]}),
    ("{{ ['a','b']|map('upper')|list }} {{ [1,2,3]|select('odd')|list }} {{ [1,2,3]|reject('odd')|list }} {{ [1,2,3]|sum }} {{ [1,3,2]|max }} {{ [1,3,2]|min }} {{ []|max }}|{{ [0, 1, '', 'a']|select|list }} {{ ['a','b']|map('replace', 'a', 'z')|list }}", {}),
    ("{% macro m(a, b=2) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{% set c = 9 %}{{ m(1) }}{{ m(1, b=3) }}{{ m(b=4, a=5) }}", {}),
    ("{% macro m(x) %}<{{ caller(x) }}>{% endmacro %}{% call(y) m(5) %}[{{ y }}]{% endcall %}", {}),
    ("{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}", {}),
    ("{% filter upper %}abc{{ 'd' }}{% endfilter %}{% set s %}In {{ 'block' }}{% endset %}[{{ s }}]{% set t | trim %}  padded  {% endset %}[{{ t }}]", {}),
    ("{% generation %}gen{% endgeneration %}{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = 'xy' %}{{ c }}{{ d }}", {}),
    ("{% set ns = namespace(a=1, b='x') %}{% set ns.a = ns.a + 1 %}{% set ns.c = [1] %}{{ ns.a }}{{ ns.b }}{{ ns.c }}{{ ns.d }}|{{ ns }}", {}),
    ("{% set x = 1 %}{% set x.y = 2 %}", {}),
    ("{% set ns = namespace() %}{% set ns._p = 1 %}", {}),
    ("{{ {'a': 1}['a'] }}{{ {'a': 1}.a }}{{ {1: 'x'}[1] }}{{ {1: 'x'}[1.0] }}{{ {true: 'x'}[1] }}{{ {'a': 1, 'a': 2} }}", {}),
    ("{{ 'ab'|first }}{{ 'ab'|last }}{{ {'a':1,'b':2}|first }}{{ {'a':1,'b':2}|last }}{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ []|first }}|", {}),
    ("{{ [1,'a']|sort }}", {}),
    ("{{ [3,1,2]|sort(reverse=true) }} {{ ['b','A','a']|sort }} {{ ['b','A','a']|sort(case_sensitive=true) }} {{ ['b','A','a']|unique|list }} {{ {'b':1,'a':2}|dictsort }} {{ {'b':1,'a':2}|dictsort(by='value') }} {{ x|sort(attribute='n')|map(attribute='n')|list }}", {"x": [{"n": 3}, {"n": 1}, {"n": 2}]}),
    ("{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 5|round }} {{ 2.5|round(method='floor') }} {{ 2.1|round(method='ceil') }} {{ -3.7|abs }} {{ -3|abs }}", {}),
    ("{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent }}|{{ 'a\n\nb'|indent(blank=true) }}|{{ 'x'|indent('> ', true) }}", {}),
    ("{{ 'x'|center(5) }}|{{ 'ab'|center(5) }}|{{ 'abc'|wordcount }} {{ 'a b-c'|wordcount }}|{{ '<a href=\"x\">&</a>'|e }}|{{ 'ok'|safe }}", {}),
    ("{{ x|default('d') }}{{ ''|default('e') }}{{ ''|default('e', true) }}{{ none|default('f') }}{{ 0|d('g', true) }}", {}),
    ("{{ ' x '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'aXbX'|replace('X','y') }}|{{ 'aaa'|replace('a','b',2) }}|{{ 'ab'|replace('', '-') }}", {}),
    ("{{ x.content[0].text }}{{ x.content.0.text }}", {"x": {"content": [{"type": "text", "text": "hi"}]}}),
    ("{{ dict(a=1) }} {{ dict(a=1, b=[2]) }} {{ {'a':1}.get('b', 2) }} {{ namespace(a=1).a }}", {}),
    ("{{ '%s-%d'|format('a', 3) }} {{ '%05.2f|%x|%r|%-4s|'|format(3.14159, 255, 'q', 'ab') }} {{ '%(n)s!'|format(n='named') }} {{ 'x=%s' % 5 }} {{ '%d%%' % 50 }}", {}),
    ("{{ '{}-{}'.format('a', 1) }} {{ '{0}{0}{1}'.format('x', 'y') }} {{ '{n}'.format(n=3) }} {{ '{{}}{}'.format(1) }}", {}),
    ("{{ messages|length }} {{ messages[0].role }} {{ messages[-1]['content'] }} {{ add_generation_prompt }} {{ tools }} {{ documents }}", {}),
    ("{{ 'abc'.upper().lower().title() }} {{ ['x', 'y']|join('-')|upper }} {{ ('a' ~ 'b')|length }} {{ -x|abs }} {{ not x is defined }}", {"x": 3}),
    ("{% if x is defined and x.y is defined %}a{% elif z %}b{% else %}c{% endif %}", {"x": {"y": 1}}),
    ("{% if x is defined and x.y is defined %}a{% elif z %}b{% else %}c{% endif %}", {"z": True}),
    ("{{ x }} {{ y }} {{ z }} {{ w }} {{ v }}", {"x": 10, "y": -3.25, "z": [1.5, 2], "w": "s", "v": False}),
    ("{{ x|tojson }} {{ x|string }} {{ x|length }} {{ x[0] }} {{ x[-1]|tojson }}", {"x": ["é", "😀", "a\"b", ["n"]]}),
    ("{{ 'a' in ['a'] }} {{ 'a' not in 'abc' }} {{ 1 in {1: 2} }} {{ 'k' in {'k': 1} }} {{ none in [none] }}", {}),
    ("{{ 'a' in none }}", {}), ("{{ 1 in 'abc' }}", {}), ("{{ [1] in {} }}", {}), ("{{ 3|length }}", {}),
    ("{{ 'abc'.nope() }}", {}), ("{{ x.nope() }}", {"x": {}}), ("{{ 5() }}", {}),
    ("{{ {'a': 1}.update({'b': 2}) }}", {}), ("{{ [1].append(2) }}", {}),
    ("{{ x.__class__ }}|{{ x._private }}|", {"x": {"_private": 1}}),
    ("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %A %j') }}", {}),
    # Laziness and types of Jinja's generator filters, Markup, views and reverse iterators.
    ("{% if [1]|select('odd') %}gen-truthy{% endif %}{% if []|select('odd') %}|still{% endif %}|{{ 5|select('odd') is iterable }}|{{ (1|map('upper')) is defined }}", {}),
    ("{% for x in 5|unique %}{% endfor %}", {}),
    ("{{ none|select|list }} {{ ''|map('upper')|list }} {{ 0|selectattr('a')|list }} {{ [1, 2, 3]|select('gt', 1)|list }} {{ [1, 2]|map('string')|join('-') }}", {}),
    ("{{ d.items()|length }} {{ d.keys()|list }} {{ 'a' in d.keys() }} {{ d.values()|list|length }} {{ d.items()|list }} {{ d.keys()|last }}", {"d": {"a": 1, "b": 2}}),
    ("{{ [3, 1]|reverse|list }} {{ 'abc'|reverse }} {{ {'a': 1, 'b': 2}|reverse|list }} {{ ([1]|reverse) is iterable }}", {}),
    ("{{ [1, 2]|safe }}|{% for c in [1, 2]|safe %}{{ c }},{% endfor %}|{{ none|safe }}", {}),
    ("{{ 0.5 is odd }} {{ 3.0 is odd }} {{ 4 is even }} {{ 7.5 is divisibleby 2.5 }}", {}),
    ("{{ 'Straße'.title() }} {{ 'ßa'|capitalize }} {{ 'ßa'|title }} {{ 'ÿ'|upper }}", {}),
    ("{{ 'abc' % [1] }}|{{ '%s' % [1, 2] }}|{{ '' % u }}|{{ '%s and %s' % (1, 'x') }}|{{ '%c%c' % (72, 'i') }}", {}),
    ("{{ x|indent }}", {"x": 5}),
    ("{{ 'abc'.removeprefix('ab') }} {{ 'abc'.removesuffix('bc') }} {{ 'abc'.removeprefix('x') }} {{ '<think>x</think>y'.split('</think>')[-1].lstrip('\\n') }}", {}),
    ("{%- for m in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}{{ index }}:{{ m.role }}{% endfor %}", {}),
    ("{{ 'a\\nb' }}|{{ 'tab\\there' }}|{{ 'nl\\\nx' }}", {}),
]

BAD_SYNTAX = [
    "{% if %}", "{{ 1 + }}", "{% for x in %}{% endfor %}", "{% endif %}", "{% if true %}", "{{ x | nosuchfilter }}",
    "{{ x is nosuchtest }}", "{% nosuchtag %}", "{{ 'unterminated }}", "{# unterminated", "{% raw %}never ends",
    "{{ (1 }}", "{{ ] }}", "{% for x in y %}{% endif %}", "{% include 'x.html' %}", "{{ x. }}", "{{ }}",
    "{% macro m(a=1, b) %}{% endmacro %}", "{% break %}", "{% set = 1 %}", "{{ 'a' 'b' 'c }}", "{{ 1 is defined is defined }}",
]


def snippet_golden():
    cases = []
    base = {"messages": [{"role": "user", "content": "Hi"}], "tools": None, "documents": None,
            "add_generation_prompt": False}
    for src, variables in SNIPPETS:
        case = {"template": src, "variables": variables}
        try:
            tmpl = ctu._cached_compile_jinja_template(src)
            case["expected"] = tmpl.render(**copy.deepcopy(base), **copy.deepcopy(variables))
        except Exception as e:
            case["error"] = error_of(e)
        cases.append(case)
    for src in BAD_SYNTAX:
        case = {"template": src, "variables": {}, "syntax_error": True}
        try:
            ctu._cached_compile_jinja_template(src).render(**copy.deepcopy(base))
            raise SystemExit(f"expected a syntax error from {src!r}")
        except Exception as e:  # mostly TemplateSyntaxError; include fails at render time
            case["error"] = error_of(e)
        cases.append(case)
    return {
        "generator": "tests/chat_template/make_golden.py",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "environment": "transformers.utils.chat_template_utils._cached_compile_jinja_template",
        "base_variables": base,
        "date": DATE,
        "cases": cases,
    }


def write(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n = len(obj["cases"])
    errors = sum("error" in c for c in obj["cases"])
    print(f"wrote {path}: {n} cases ({errors} errors)", file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in TEMPLATES:
        write(f"{name}.json", real_template_golden(name))
    write("jinja_snippets.json", snippet_golden())


if __name__ == "__main__":
    main()
