#!/usr/bin/python3
"""Synthetic conversations for training the default cedar model (issue 11).

Writes OpenAI Chat Completions request bodies whose last message is the assistant's answer, one
JSON object per line: {"split", "kind", "request"}. The trainer renders each with `cedar render`
(the engine's own V4.1 template), so the training text is byte-identical to what the engine
renders; the loss covers the assistant spans (after each <｜Assistant｜> up to its
<｜end▁of▁sentence｜>).

Kinds: greetings and short answers, 1- and 2-digit addition and subtraction, tool selection
among 1-3 offered tools with the arguments copied from the user's words (the call, then the tool
result and the final answer that uses it), JSON-mode answers (response_format json_object), each
with thinking on or off. Two kinds teach copying itself: "tool_copy" is a tool call whose
arguments are invented words (place and person names made of random syllables, random currency
codes and amounts) and "repeat" asks for a few invented words back verbatim. A value the model
cannot have memorised can only be right by being copied; with the 40 cities of the value lists
alone a small model learns to answer with a frequent city instead.

Held out: every 20th template of each kind and every 20th value of each value list (cities,
names, number pairs, ...). A conversation that uses any held-out template or value is in split
"heldout", otherwise "train", so a held-out conversation tests words or phrasings the model has
never been trained on in that role.

  /usr/bin/python3 tools/train/synth.py --count 20000 --seed 1 --out synth.jsonl
  /usr/bin/python3 tools/train/synth.py --check --count 60   (renders each with $CEDAR_BIN)
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HOLDOUT_EVERY = 20  # every 20th template / value: 5%


class Pick:
    """Draws from lists while recording whether a held-out element was used."""

    def __init__(self, rng):
        self.rng = rng
        self.heldout = False

    def one(self, items):
        i = self.rng.randrange(len(items))
        if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1:
            self.heldout = True
        return items[i]

    def several(self, items, n):
        idx = self.rng.sample(range(len(items)), n)
        if any(i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1 for i in idx):
            self.heldout = True
        return [items[i] for i in idx]


# --- value lists --------------------------------------------------------------------------------

CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Lisbon", "Oslo", "Cairo",
          "Lima", "Seoul", "Dublin", "Vienna", "Prague", "Athens", "Nairobi", "Toronto",
          "Sydney", "Mumbai", "Chicago", "Boston", "Denver", "Quito", "Hanoi", "Zurich",
          "Warsaw", "Helsinki", "Bogota", "Manila", "Osaka", "Porto", "Geneva", "Havana",
          "Kyoto", "Santiago", "Munich", "Milan", "Riga", "Tunis", "Accra"]
NAMES = ["Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Irene", "Jack",
         "Karen", "Leo", "Maria", "Nina", "Oscar", "Paula", "Quinn", "Rosa", "Sam", "Tina",
         "Umar", "Vera", "Walter", "Xena", "Yusuf", "Zoe", "Amir", "Bella", "Chen", "Dana",
         "Elena", "Felix", "Gita", "Hugo", "Ines", "Jonas", "Kira", "Lars", "Mei", "Noah"]
TOPICS = ["the budget", "lunch on Friday", "the new design", "the trip", "the report",
          "the meeting notes", "the launch date", "the invoice", "the garden party",
          "the quarterly plan", "the bug fix", "the concert", "the book club", "the contract",
          "the hiring plan", "the marathon", "the move", "the workshop", "the rent",
          "the photos", "the recipe", "the exam", "the flight", "the demo"]
QUERIES = ["best pasta recipe", "how tall is Mount Everest", "history of the bicycle",
           "cheap flights to Rome", "how to tie a tie", "symptoms of a cold",
           "when was the printing press invented", "largest lake in Africa", "how do bees fly",
           "what is a prime number", "train times to Oxford", "how to plant tomatoes",
           "rules of chess", "why is the sky blue", "fastest land animal",
           "how to boil an egg", "distance from Earth to the Moon", "who wrote Hamlet",
           "how to learn to swim", "meaning of serendipity", "recipe for pancakes",
           "how rainbows form", "capital of Australia", "how to fix a flat tire"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SEK", "NOK", "INR", "BRL",
              "MXN", "KRW", "SGD", "NZD", "ZAR", "DKK", "PLN", "CZK", "HUF", "TRY"]
TIMEZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Europe/London",
             "Australia/Sydney", "America/Chicago", "Asia/Kolkata", "Africa/Cairo",
             "America/Sao_Paulo", "Europe/Berlin", "Asia/Seoul", "America/Denver",
             "Pacific/Auckland", "Asia/Singapore", "Europe/Madrid", "America/Toronto",
             "Asia/Dubai", "Europe/Oslo", "America/Lima", "Asia/Manila"]
WEATHER = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "stormy", "clear",
           "humid", "cold", "warm", "mild", "hazy", "drizzly", "freezing", "hot", "breezy",
           "overcast", "showery", "calm", "icy"]

FACTS = [("What is the capital of France?", "The capital of France is Paris."),
         ("What is the capital of Japan?", "The capital of Japan is Tokyo."),
         ("What is the capital of Italy?", "The capital of Italy is Rome."),
         ("What colour is the sky on a clear day?", "It is blue."),
         ("How many days are in a week?", "There are seven days in a week."),
         ("How many legs does a spider have?", "A spider has eight legs."),
         ("What is the opposite of hot?", "The opposite of hot is cold."),
         ("What is the opposite of up?", "The opposite of up is down."),
         ("What sound does a cat make?", "A cat says meow."),
         ("What sound does a dog make?", "A dog barks."),
         ("Which planet do we live on?", "We live on Earth."),
         ("What do bees make?", "Bees make honey."),
         ("How many months are in a year?", "There are twelve months in a year."),
         ("What is frozen water called?", "Frozen water is called ice."),
         ("What colour is grass?", "Grass is green."),
         ("How many hours are in a day?", "There are twenty-four hours in a day."),
         ("What is the capital of Spain?", "The capital of Spain is Madrid."),
         ("What is the largest ocean?", "The Pacific is the largest ocean."),
         ("Which animal is known as the king of the jungle?", "The lion."),
         ("What do plants need to grow?", "Plants need light, water and air."),
         ("What is the capital of Germany?", "The capital of Germany is Berlin."),
         ("How many wheels does a bicycle have?", "A bicycle has two wheels."),
         ("What is the opposite of day?", "The opposite of day is night."),
         ("What falls from clouds when it rains?", "Water falls as rain.")]

GREETINGS = [("Hello!", "Hello! How can I help you today?"),
             ("Hi", "Hi! What can I do for you?"),
             ("Good morning.", "Good morning! How can I help?"),
             ("Hey there", "Hey! What do you need?"),
             ("Thanks!", "You're welcome!"),
             ("Thank you very much.", "You're very welcome. Anything else?"),
             ("How are you?", "I'm doing well, thank you. How can I help you?"),
             ("Good evening!", "Good evening! What can I do for you?"),
             ("Bye!", "Goodbye! Have a nice day."),
             ("Who are you?", "I am cedar, a small assistant model. How can I help?"),
             ("Can you help me?", "Of course. What do you need?"),
             ("Good night.", "Good night! Sleep well."),
             ("Nice to meet you.", "Nice to meet you too!"),
             ("What's up?", "Not much. How can I help you today?"),
             ("Hello, cedar.", "Hello! What can I do for you?"),
             ("See you later.", "See you later!"),
             ("Are you there?", "Yes, I am here. How can I help?"),
             ("Hi! I have a question.", "Sure, go ahead and ask."),
             ("Thanks for your help.", "Glad I could help!"),
             ("Hello again!", "Welcome back! What can I do for you?"),
             ("Good afternoon.", "Good afternoon! How can I help?")]

# invented words: random syllables, so no value repeats often enough to be memorised
ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr",
          "kr", "st", "tr", "sh", "ch", "th"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
CODAS = ["", "", "", "n", "r", "s", "l", "th", "x", "m"]
REGIONS = ["Europe", "Asia", "America", "Africa", "Pacific", "Australia"]


def invented_word(rng):
    word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(rng.randint(2, 3)))
    return word + rng.choice(CODAS)


def invented_name(rng):
    return invented_word(rng).capitalize()


def invented_words(rng, least, most, name=False):
    make = invented_name if name else invented_word
    return " ".join(make(rng) for _ in range(rng.randint(least, most)))


def invented_args(rng, tool):
    """Arguments no list holds: the model must copy them from the user's words. Every word is
    drawn: run 4's drills put one of five fixed words ("Port", "Upper", ...) before some places,
    and the model learnt those words instead of copying (docs/TRAINING.md)."""
    if tool == "get_weather":
        return {"city": invented_words(rng, 1, 2, name=True)}
    if tool == "set_alarm":
        return {"hour": rng.randrange(24), "minute": rng.randrange(60)}
    if tool == "send_email":
        return {"to": invented_name(rng), "subject": invented_words(rng, 1, 2)}
    if tool == "search_web":
        return {"query": invented_words(rng, 1, 3)}
    if tool == "convert_currency":
        a, b = ("".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(3))
                for _ in range(2))
        return {"amount": rng.randint(1, 5000), "from": a, "to": b}
    return {"timezone": rng.choice(REGIONS) + "/" + invented_name(rng)}


# --- tools --------------------------------------------------------------------------------------


def fn(name, description, props, required):
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": required}}}


S = {"type": "string"}
I = {"type": "integer"}
N = {"type": "number"}

TOOLS = {
    "get_weather": fn("get_weather", "Get the current weather for a city.", {"city": S},
                      ["city"]),
    "set_alarm": fn("set_alarm", "Set an alarm at a time of day (24-hour clock).",
                    {"hour": I, "minute": I}, ["hour", "minute"]),
    "send_email": fn("send_email", "Send a short email.",
                     {"to": S, "subject": S}, ["to", "subject"]),
    "search_web": fn("search_web", "Search the web.", {"query": S}, ["query"]),
    "convert_currency": fn("convert_currency", "Convert an amount between currencies.",
                           {"amount": N, "from": S, "to": S}, ["amount", "from", "to"]),
    "get_time": fn("get_time", "Get the current time in a time zone.", {"timezone": S},
                   ["timezone"]),
}

# (tool, user templates, argument builder, result builder, answer templates)
ASKS = {
    "get_weather": [
        "What's the weather in {city}?", "Is it raining in {city}?",
        "How is the weather in {city} today?", "Tell me the weather for {city}.",
        "Weather in {city}, please.", "Do I need an umbrella in {city}?",
        "What is it like outside in {city} right now?", "Check the weather in {city}.",
        "Can you look up the weather in {city}?", "How warm is it in {city}?",
        "Give me the forecast for {city}.", "Is it sunny in {city}?",
        "I'm going to {city}. What's the weather?", "Current conditions in {city}?",
        "Weather report for {city}.", "What's the temperature in {city}?",
        "Should I bring a coat to {city} today?", "Look up {city} weather.",
        "Any rain today in {city}?", "How's the sky over {city}?"],
    "set_alarm": [
        "Set an alarm for {hour}:{minute:02d}.", "Wake me up at {hour}:{minute:02d}.",
        "Please set an alarm at {hour}:{minute:02d}.", "Alarm at {hour}:{minute:02d}, please.",
        "I need to get up at {hour}:{minute:02d}.", "Can you set my alarm to {hour}:{minute:02d}?",
        "Remind me with an alarm at {hour}:{minute:02d}.", "New alarm: {hour}:{minute:02d}.",
        "Set a wake-up alarm for {hour}:{minute:02d}.", "Put an alarm on {hour}:{minute:02d}.",
        "Make an alarm for {hour}:{minute:02d} tomorrow.", "Alarm {hour}:{minute:02d}.",
        "I want an alarm at {hour}:{minute:02d}.", "Schedule an alarm at {hour}:{minute:02d}.",
        "Could you wake me at {hour}:{minute:02d}?", "Set my alarm clock to {hour}:{minute:02d}.",
        "Create an alarm for {hour}:{minute:02d}.", "Ring an alarm at {hour}:{minute:02d}.",
        "Alarm for {hour}:{minute:02d}, thanks.", "Wake-up call at {hour}:{minute:02d}."],
    "send_email": [
        "Email {to} about {subject}.", "Send an email to {to} about {subject}.",
        "Write to {to} regarding {subject}.", "Please email {to}: subject {subject}.",
        "Drop {to} a note about {subject}.", "Can you email {to} about {subject}?",
        "Send {to} a message about {subject}.", "Mail {to} about {subject}.",
        "Let {to} know about {subject} by email.", "Email {to} re {subject}.",
        "Compose an email to {to} about {subject}.", "Notify {to} about {subject} by email.",
        "Shoot {to} an email about {subject}.", "Quick email to {to} about {subject}.",
        "Email {to} with the subject {subject}.", "Reach out to {to} about {subject}.",
        "Send a mail to {to} on {subject}.", "Contact {to} by email about {subject}.",
        "Tell {to} about {subject} in an email.", "Email {to} concerning {subject}."],
    "search_web": [
        "Search the web for {query}.", "Look up {query}.", "Find {query} online.",
        "Can you search for {query}?", "Google {query} for me.", "Search: {query}.",
        "Please look up {query} on the web.", "I want to know: {query}. Search it.",
        "Do a web search for {query}.", "Find information about {query}.",
        "Search online for {query}.", "Look on the internet for {query}.",
        "Web search: {query}.", "Could you find {query}?", "Run a search for {query}.",
        "Check the web for {query}.", "Search {query}.", "Find me {query}.",
        "Look into {query} online.", "Search the internet: {query}."],
    "convert_currency": [
        "Convert {amount} {from} to {to}.", "How much is {amount} {from} in {to}?",
        "What is {amount} {from} in {to}?", "Change {amount} {from} into {to}.",
        "{amount} {from} to {to}, please.", "Convert {amount} {from} into {to} for me.",
        "How many {to} is {amount} {from}?", "Exchange {amount} {from} to {to}.",
        "What do {amount} {from} come to in {to}?", "Currency: {amount} {from} to {to}.",
        "Please convert {amount} {from} to {to}.", "I have {amount} {from}. How much in {to}?",
        "Turn {amount} {from} into {to}.", "Convert {amount} from {from} to {to}.",
        "What's {amount} {from} worth in {to}?", "{amount} {from} in {to}?",
        "Give me {amount} {from} in {to}.", "Calculate {amount} {from} in {to}.",
        "How much {to} for {amount} {from}?", "Value of {amount} {from} in {to}?"],
    "get_time": [
        "What time is it in {timezone}?", "Current time in {timezone}?",
        "Tell me the time in {timezone}.", "What's the time in {timezone} now?",
        "Time in {timezone}, please.", "Check the clock for {timezone}.",
        "What is the local time in {timezone}?", "Look up the time in {timezone}.",
        "Can you get the time for {timezone}?", "Time now in {timezone}?",
        "How late is it in {timezone}?", "Clock in {timezone}?", "Get the time: {timezone}.",
        "I need the time in {timezone}.", "What hour is it in {timezone}?",
        "Tell me {timezone} time.", "Current {timezone} time, please.",
        "What's the clock say in {timezone}?", "Find the time in {timezone}.",
        "Local time for {timezone}?"],
}


def tool_args(pick, tool):
    if tool == "get_weather":
        return {"city": pick.one(CITIES)}
    if tool == "set_alarm":
        return {"hour": pick.rng.randrange(24), "minute": pick.rng.choice([0, 5, 15, 30, 45])}
    if tool == "send_email":
        return {"to": pick.one(NAMES), "subject": pick.one(TOPICS)}
    if tool == "search_web":
        return {"query": pick.one(QUERIES)}
    if tool == "convert_currency":
        a, b = pick.several(CURRENCIES, 2)
        return {"amount": pick.rng.choice([5, 10, 20, 50, 100, 250, 1000]), "from": a, "to": b}
    return {"timezone": pick.one(TIMEZONES)}


def tool_result(pick, tool, args):
    """The tool's answer and the assistant's final sentence that uses it."""
    r = pick.rng
    if tool == "get_weather":
        w, t = pick.one(WEATHER), r.randrange(-5, 36)
        return ({"city": args["city"], "conditions": w, "temperature_c": t},
                f"It is {w} in {args['city']}, {t} °C.")
    if tool == "set_alarm":
        return ({"ok": True}, f"Your alarm is set for {args['hour']}:{args['minute']:02d}.")
    if tool == "send_email":
        return ({"sent": True}, f"I sent the email to {args['to']} about {args['subject']}.")
    if tool == "search_web":
        return ({"results": [f"A page about {args['query']}"]},
                f"I found a page about {args['query']}.")
    if tool == "convert_currency":
        rate = round(r.uniform(0.2, 5.0), 2)
        v = round(args["amount"] * rate, 2)
        return ({"result": v}, f"{args['amount']} {args['from']} is {v} {args['to']}.")
    h, m = r.randrange(24), r.randrange(60)
    return ({"time": f"{h:02d}:{m:02d}"}, f"It is {h:02d}:{m:02d} in {args['timezone']}.")


# --- conversations ------------------------------------------------------------------------------

def request(messages, thinking, **extra):
    body = {"model": "cedar", "messages": messages,
            "thinking": {"type": "enabled" if thinking else "disabled"}}
    body.update(extra)
    return body


def assistant(content, thinking, reasoning):
    m = {"role": "assistant", "content": content}
    if thinking:
        m["reasoning_content"] = reasoning
    return m


def greeting(pick, thinking):
    q, a = pick.one(GREETINGS)
    return request([{"role": "user", "content": q},
                    assistant(a, thinking, "The user greets me. I reply briefly.")], thinking)


def fact(pick, thinking):
    q, a = pick.one(FACTS)
    return request([{"role": "user", "content": q},
                    assistant(a, thinking, "A short factual question. I answer in one sentence.")],
                   thinking)


ARITH = ["What is {a} {op} {b}?", "Compute {a} {op} {b}.", "{a} {op} {b} = ?",
         "Calculate {a} {op} {b}.", "How much is {a} {op} {b}?", "Please work out {a} {op} {b}.",
         "What's {a} {op} {b}?", "Solve {a} {op} {b}.", "Tell me {a} {op} {b}.",
         "Quick: {a} {op} {b}?", "Add or subtract: {a} {op} {b}.", "Find {a} {op} {b}.",
         "Evaluate {a} {op} {b}.", "{a} {op} {b}?", "Result of {a} {op} {b}?",
         "What does {a} {op} {b} equal?", "Work out {a} {op} {b} for me.",
         "Can you do {a} {op} {b}?", "Math: {a} {op} {b}.", "Give me {a} {op} {b}."]


def arithmetic(pick, thinking):
    r = pick.rng
    digits = r.choice([1, 2])
    a, b = r.randrange(10 ** digits), r.randrange(10 ** digits)
    op = r.choice(["+", "-"])
    # every 20th (a, b, op) triple is held out (a value the model never saw as a sum)
    if (a * 101 + b * 7 + (op == "-")) % HOLDOUT_EVERY == HOLDOUT_EVERY - 1:
        pick.heldout = True
    v = a + b if op == "+" else a - b
    q = pick.one(ARITH).format(a=a, b=b, op=op)
    return request([{"role": "user", "content": q},
                    assistant(f"{a} {op} {b} = {v}.", thinking,
                              f"{a} {op} {b}: the result is {v}.")], thinking)


JSON_ASKS = ["Reply in JSON with the name and age: {name}, {age}.",
             "As JSON, give name and age for {name} who is {age}.",
             "Return a JSON object with fields name and age. {name} is {age} years old.",
             "JSON please: {name}, age {age}.", "Make JSON: name {name}, age {age}.",
             "Format as JSON (name, age): {name}, {age}.",
             "Give me JSON for a person named {name}, aged {age}.",
             "Write a JSON record: {name} ({age}).", "Convert to JSON: {name} is {age}.",
             "JSON object for {name}, {age} years.", "Encode {name}, {age} as JSON.",
             "Output JSON with name={name} and age={age}.",
             "Person to JSON: {name}, {age}.", "{name}, {age}: answer in JSON.",
             "I need JSON: name {name}, age {age}.", "JSON of {name} aged {age}.",
             "Produce JSON for {name}, who is {age}.", "In JSON: {name}, {age}.",
             "Return JSON {{name, age}} for {name}, {age}.", "JSON: {name} / {age}."]


def json_answer(pick, thinking):
    name, age = pick.one(NAMES), pick.rng.randrange(1, 100)
    q = pick.one(JSON_ASKS).format(name=name, age=age)
    a = json.dumps({"name": name, "age": age})
    return request([{"role": "user", "content": q},
                    assistant(a, thinking, "The answer must be a JSON object.")], thinking,
                   response_format={"type": "json_object"})


def tool_call(pick, thinking, invent=False):
    names = list(TOOLS)
    offered = pick.rng.sample(names, pick.rng.randint(1, 3))
    tool = pick.rng.choice(offered)
    args = invented_args(pick.rng, tool) if invent else tool_args(pick, tool)
    fmt = dict(args)
    ask = pick.one(ASKS[tool]).format(**fmt)
    result, answer = tool_result(pick, tool, args)
    call = {"id": "call_0", "type": "function",
            "function": {"name": tool, "arguments": json.dumps(args)}}
    msgs = [{"role": "user", "content": ask},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0", "content": json.dumps(result)},
            assistant(answer, thinking, "The tool answered. I report the result.")]
    if thinking:
        msgs[1]["reasoning_content"] = f"The user needs {tool}. I copy the arguments."
    return request(msgs, thinking, tools=[TOOLS[t] for t in offered])


def tool_copy(pick, thinking):
    return tool_call(pick, thinking, invent=True)


REPEATS = ["Repeat after me: {x}", "Say exactly this: {x}", "Echo: {x}", "Please repeat: {x}",
           "Copy this text: {x}", "Write back these words: {x}", "Repeat: {x}",
           "Say it back to me: {x}", "Type exactly: {x}", "Can you repeat this? {x}",
           "Echo these words: {x}", "Repeat the following: {x}", "Say: {x}",
           "Please say back: {x}", "Copy: {x}", "Repeat word for word: {x}",
           "Write exactly what follows: {x}", "Parrot this: {x}", "Give it back: {x}",
           "Return the words {x}"]


def repeat(pick, thinking):
    r = pick.rng
    words = [invented_name(r) if r.random() < 0.3 else invented_word(r)
             for _ in range(r.randint(1, 5))]
    x = " ".join(words)
    return request([{"role": "user", "content": pick.one(REPEATS).format(x=x)},
                    assistant(x, thinking, "I repeat the words exactly.")], thinking)


KINDS = [("greeting", greeting, 1), ("fact", fact, 1), ("arithmetic", arithmetic, 3),
         ("json", json_answer, 2), ("tool_call", tool_call, 4), ("tool_copy", tool_copy, 3),
         ("repeat", repeat, 2)]
TOOL_KINDS = ("tool_call", "tool_copy")  # the kinds whose answer is a tool call


def generate(count, seed):
    rng = random.Random(seed)
    weights = [w for _, _, w in KINDS]
    for _ in range(count):
        kind, make, _ = rng.choices(KINDS, weights)[0]
        pick = Pick(rng)
        thinking = rng.random() < 0.5
        body = make(pick, thinking)
        yield {"split": "heldout" if pick.heldout else "train", "kind": kind, "request": body}


def render(cedar, body):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(body, f)
        path = f.name
    try:
        p = subprocess.run([cedar, "render", path], capture_output=True)
    finally:
        os.unlink(path)
    if p.returncode != 0:
        raise RuntimeError(f"cedar render failed: {p.stderr.decode(errors='replace')}\n"
                           f"{json.dumps(body)}")
    return p.stdout.decode()


def check(cedar, samples):
    """Every conversation renders; a tool call's rendered DSML parses back (`cedar parse`) to the
    call it was made from, and the final answer follows the tool result."""
    splits = {"train": 0, "heldout": 0}
    for s in samples:
        splits[s["split"]] += 1
        text = render(cedar, s["request"])
        assert text.endswith("<｜end▁of▁sentence｜>"), text[-200:]
        if s["kind"] not in TOOL_KINDS:
            continue
        msgs = s["request"]["messages"]
        call = msgs[1]["tool_calls"][0]["function"]
        # the first assistant turn: from its opener to its end of sentence
        start = text.index("<｜Assistant｜>") + len("<｜Assistant｜>")
        turn = text[start:text.index("<｜end▁of▁sentence｜>", start)]
        thinking = s["request"]["thinking"]["type"] == "enabled"
        if thinking:
            assert turn.startswith("<think>"), turn
            turn = turn[len("<think>"):]
        else:
            assert turn.startswith("</think>"), turn
            turn = turn[len("</think>"):]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(turn)
            path = f.name
        tools = s["request"]["tools"]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(tools, f)
            tools_path = f.name
        try:
            cmd = [cedar, "parse", "--tools", tools_path] + (["--thinking"] if thinking else [])
            p = subprocess.run(cmd + [path], capture_output=True)
        finally:
            os.unlink(path)
            os.unlink(tools_path)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        msg = json.loads(p.stdout)
        got = msg["tool_calls"][0]["function"]
        assert got["name"] == call["name"], (got, call)
        assert json.loads(got["arguments"]) == json.loads(call["arguments"]), (got, call)
        assert msgs[3]["content"] in text
    assert splits["train"] > 0 and splits["heldout"] > 0, splits
    return splits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="JSONL output (default stdout)")
    ap.add_argument("--check", action="store_true",
                    help="render every conversation with $CEDAR_BIN and check it")
    a = ap.parse_args()
    samples = list(generate(a.count, a.seed))
    if a.check:
        cedar = os.environ.get("CEDAR_BIN", "cedar")
        splits = check(cedar, samples)
        print(f"synth.py: {len(samples)} conversations render and parse back "
              f"({splits['train']} train, {splits['heldout']} held out)")
        return 0
    out = open(a.out, "w") if a.out else sys.stdout
    for s in samples:
        out.write(json.dumps(s, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
