"""The course's own corpus: short children's stories written by a seeded generator.

Why a generator and not a download: the course must run with nothing fetched at run time,
and its data must be free of any licence question. Simple stories (in the spirit of the
TinyStories data set, but made here from our own word lists and templates) are what a model
of a few million parameters can learn on a laptop CPU in minutes: short sentences, a small
vocabulary, a plot with a beginning and an end, so a learner sees samples turn into
recognisable stories. Invented names of people and places (built from syllables) give the
tokenizer enough distinct words to learn its 8,192 merges.

    python -m andrea_course.train.corpus          # rewrites andrea_course/data/stories.txt.gz

The shipped file is exactly what `generate(SEED, N_STORIES)` returns; tests check that.
"""
from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"
CORPUS_FILE = DATA / "stories.txt.gz"
EOT = "<|endoftext|>"
SEED = 2026
N_STORIES = 6000

def options(text: str) -> list[str]:
    """'a|b c|d' -> ['a', 'b c', 'd'], whitespace (line breaks included) normalised to one space."""
    return [" ".join(item.split()) for item in text.split("|")]


NAMES = """Lily Tom Mia Ben Sam Anna Max Lucy Leo Ella Jack Zoe Finn Ruby Noah Ivy Owen Nora
Eli Rosa Theo Maya Hugo Lena Oscar Ada Milo Clara Felix Iris Jonah Daisy Arlo Hazel Kai June
Luca Stella Omar Nina Ravi Aiko Tariq Freya Mateo Sofia Yusuf Amara Pablo Greta""".split()
ANIMALS = """cat dog bunny bear fox owl duck mouse frog puppy kitten lamb pig hen goat horse
squirrel hedgehog turtle bird deer otter badger pony goose robin""".split()
KINDS = ["boy", "girl"] * 3 + ANIMALS
PLACES = options("""a small house|a big farm|a quiet village|a busy town|a green forest|a sunny meadow|
a tall tree|a cozy cottage|a little boat|a windy hill|a snowy valley|a warm kitchen|a blue lake|
an old mill|a bright garden|a sandy beach|a tiny island|a red barn""")
OBJECTS = """ball kite box hat shell stone key book cup spoon feather leaf flower map drum
bell ribbon button sock boot basket apple cake cookie jar lamp rope stick toy boat""".split()
ADJS = """shiny red blue green yellow big small soft old new round bright funny strange
pretty tiny heavy warm cold golden purple striped spotted sparkly muddy wet""".split()
SPOTS = options("""under the bed|behind the door|in the garden|by the river|near the big rock|
in the tall grass|under a tree|on the hill|in the sand|next to the fence|in an old box|
at the bottom of the pond|inside a hollow log|on the kitchen table""")
ACTIVITIES = options("""play in the garden|run in the park|read books|sing songs|paint pictures|
build towers with blocks|splash in puddles|climb trees|look at the stars|bake cookies with
mom|help dad in the garden|dance in the rain|count the clouds|fly a kite|swim in the lake|
draw with chalk|pick flowers|play hide and seek""")
FEELINGS = """happy sad scared excited angry surprised proud tired curious worried brave
lonely silly calm""".split()
FRIEND_ACTS = options("""shared a snack|played a game|built a fort|sang a song together|went for a walk|
looked for shells|made a sandcastle|drew a big picture|told funny jokes|had a picnic""")
WEATHER = options("""The sun was warm.|It was a rainy day.|The wind was strong.|Snow fell softly.|
The sky was grey and cloudy.|It was a hot summer day.|Leaves fell from the trees.|
The morning was cold and bright.""")
MORALS = options("""Sharing makes everyone happy.|It is good to be kind to others.|Friends help each other.|
Being brave is not the same as not being scared.|It is okay to ask for help.|
Saying sorry can fix many things.|Patience brings good things.|Telling the truth is always best.|
Trying again is how we learn.|A small help can mean a lot.""")
NUMBERS = "two three four five six seven eight nine ten".split()
ONSETS = "b br c ch d dr f fl g gr h j k l m n p pr qu r s sh st t th tr v w z".split()
VOWELS = "a e i o u ai ea ee oo ou ie".split()
CODAS = ["", "", "", "n", "l", "r", "s", "th", "m", "nd", "rk", "ll", "sh", "x", "t"]
PLACE_ENDS = ["ford", "wick", "by", "ton", "dale", "mere", "holm", "vale", "brook", "field", "moor", "stead"]


def invented_word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables))


def make_world(seed: int) -> dict:
    """Invented names of people, towns and creatures: many distinct, pronounceable words."""
    rng = random.Random(seed)
    towns = sorted({invented_word(rng, rng.randint(1, 2)).capitalize() + rng.choice(PLACE_ENDS)
                    for _ in range(2500)})
    people = sorted({invented_word(rng, rng.randint(2, 3)).capitalize() for _ in range(3000)})
    creatures = sorted({invented_word(rng, 2) for _ in range(600)})
    return dict(towns=towns, people=people, creatures=creatures)


class Story:
    def __init__(self, rng: random.Random, world: dict):
        self.rng, self.world = rng, world
        self.hero = rng.choice(NAMES + rng.sample(world["people"], 3))
        self.kind = rng.choice(KINDS)
        self.he = "he" if (self.kind == "boy" or (self.kind != "girl" and rng.random() < 0.5)) else "she"
        if self.kind == "girl":
            self.he = "she"
        self.his = {"he": "his", "she": "her"}[self.he]
        self.friend = rng.choice([n for n in NAMES if n != self.hero])
        self.friend_kind = rng.choice(ANIMALS)

    def c(self, options):
        return self.rng.choice(options)

    def opening(self) -> list[str]:
        r, w = self.rng, self.world
        kind = self.kind if self.kind in ("boy", "girl") else self.kind
        town = self.c(w["towns"])
        first = self.c([
            f"Once upon a time, there was a little {kind} named {self.hero}.",
            f"Once there was a {self.c(ADJS)} {kind} called {self.hero}.",
            f"In the town of {town}, there lived a {kind} named {self.hero}.",
            f"{self.hero} was a little {kind} who lived in {self.c(PLACES)}.",
            f"Long ago, in {self.c(PLACES)} near {town}, lived a {kind} named {self.hero}.",
        ])
        out = [first]
        if r.random() < 0.7:
            out.append(f"{self.he.capitalize()} liked to {self.c(ACTIVITIES)}.")
        if r.random() < 0.5:
            out.append(self.c(WEATHER))
        return out

    def lost_item(self) -> list[str]:
        obj, adj = self.c(OBJECTS), self.c(ADJS)
        spot, spot2 = self.rng.sample(SPOTS, 2)
        return [
            f"{self.hero} had a {adj} {obj} that {self.he} loved very much.",
            f"One day, the {obj} was gone!",
            f"{self.hero} felt {self.c(['sad', 'worried', 'scared'])}.",
            f'"Where is my {obj}?" {self.he} asked.',
            f"{self.he.capitalize()} looked {spot}, but it was not there.",
            f"Then {self.he} asked {self.friend} the {self.friend_kind} for help.",
            f'"Let us look {spot2}," said {self.friend}.',
            f"They looked {spot2} and found the {adj} {obj}!",
            f"{self.hero} was so {self.c(['happy', 'glad', 'excited'])}. "
            f'"Thank you, {self.friend}!" {self.he} said.',
        ]

    def new_friend(self) -> list[str]:
        creature = self.c(self.world["creatures"])
        feeling = self.c(["shy", "lonely", "scared", "sad"])
        act = self.c(FRIEND_ACTS)
        return [
            f"One day, {self.hero} met a {feeling} little {creature} {self.c(SPOTS)}.",
            f'"Hello," said {self.hero}. "What is your name?"',
            f'"I am {self.c(self.world["people"])}," said the {creature}. "I have no friends."',
            f'"I can be your friend," said {self.hero} with a smile.',
            f"The {creature} was very happy. They {act} until the sun went down.",
            f"From that day on, {self.hero} and the {creature} were best friends.",
        ]

    def counting(self) -> list[str]:
        n = self.rng.randint(2, 10)
        k = self.rng.randint(1, n - 1)
        obj = self.c(["apples", "cookies", "shells", "stones", "flowers", "eggs", "berries"])
        word = NUMBERS[n - 2]
        return [
            f"{self.hero} went to {self.c(self.world['towns'])} to get some {obj}.",
            f"{self.he.capitalize()} found {word} {obj} and put them in a basket.",
            f"On the way home, {self.he} gave {k} to {self.friend}.",
            f"Now {self.he} had {n - k} {obj} left, and {self.friend} had {k}.",
            f'"Sharing is fun," said {self.hero}.',
        ]

    def adventure(self) -> list[str]:
        town = self.c(self.world["towns"])
        obstacle = self.c(["a deep river", "a big hill", "a dark cave", "a thick forest", "a long bridge"])
        return [
            f"One morning, {self.hero} wanted to visit {town}.",
            f"{self.he.capitalize()} packed a {self.c(OBJECTS)} and a {self.c(OBJECTS)} in {self.his} bag.",
            f"On the way, {self.he} came to {obstacle}.",
            f"{self.hero} felt {self.c(['scared', 'worried', 'tired'])}, but {self.he} did not give up.",
            f"{self.friend} the {self.friend_kind} came and showed {self.hero} the way.",
            f"At last they reached {town}. The people there were {self.c(['kind', 'friendly', 'happy'])}.",
            f"{self.hero} stayed for {self.c(NUMBERS)} days and then went home.",
        ]

    def mistake(self) -> list[str]:
        obj = self.c(OBJECTS)
        return [
            f"{self.hero} and {self.friend} were playing with a {self.c(ADJS)} {obj}.",
            f"{self.hero} wanted the {obj} all for {'himself' if self.he == 'he' else 'herself'}.",
            f"{self.he.capitalize()} pulled it, and the {obj} broke.",
            f"{self.friend} started to cry. {self.hero} felt bad.",
            f'"I am sorry," said {self.hero}. "We can fix it together."',
            f"They fixed the {obj} with {self.c(['glue', 'tape', 'string', 'a ribbon'])}, and played again.",
        ]

    def weather(self) -> list[str]:
        return [
            f"One day, dark clouds came over {self.c(PLACES)}.",
            f"Rain began to fall, and the wind blew {self.c(['hard', 'loud', 'cold'])}.",
            f"{self.hero} was {self.c(['scared', 'worried'])}, so {self.he} hid {self.c(SPOTS)}.",
            f"Then {self.friend} came with a {self.c(ADJS)} umbrella.",
            f'"Do not be afraid," said {self.friend}. "The storm will pass."',
            f"Soon the sun came out, and a rainbow filled the sky.",
            f"{self.hero} and {self.friend} ran outside to {self.c(ACTIVITIES)}.",
        ]

    def ending(self) -> list[str]:
        r = self.rng
        out = []
        if r.random() < 0.6:
            out.append(f"That night, {self.hero} went to bed feeling {self.c(FEELINGS[:7])}.")
        if r.random() < 0.5:
            out.append(self.c(MORALS))
        if r.random() < 0.4:
            out.append("The end.")
        return out

    def write(self) -> str:
        plots = [self.lost_item, self.new_friend, self.counting, self.adventure, self.mistake, self.weather]
        body = self.opening()
        for plot in self.rng.sample(plots, self.rng.choice([1, 1, 2])):
            body += plot()
        body += self.ending()
        # a paragraph break now and then, as in real stories
        cut = self.rng.randint(1, max(1, len(body) - 1))
        return " ".join(body[:cut]) + ("\n\n" if self.rng.random() < 0.5 else " ") + " ".join(body[cut:])


def generate(seed: int = SEED, n_stories: int = N_STORIES) -> list[str]:
    """n_stories stories, the same for the same seed on every machine."""
    world = make_world(seed)
    rng = random.Random(seed + 1)
    return [Story(rng, world).write() for _ in range(n_stories)]


def load_corpus(path: str | Path | None = None) -> list[str]:
    """The stories shipped with the course (or a file written by `write`), one str each."""
    path = Path(path) if path is not None else CORPUS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no corpus at {path}; write it with `python -m andrea_course.train.corpus`")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        text = f.read()
    return [doc.strip("\n") for doc in text.split(f"\n{EOT}\n")]


def write(path: Path = CORPUS_FILE, seed: int = SEED, n_stories: int = N_STORIES) -> Path:
    text = f"\n{EOT}\n".join(generate(seed, n_stories)) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:     # mtime=0: the same bytes every time
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
            gz.write(text.encode("utf-8"))
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write the course's story corpus.")
    parser.add_argument("--out", type=Path, default=CORPUS_FILE)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--stories", type=int, default=N_STORIES)
    args = parser.parse_args(argv)
    path = write(args.out, args.seed, args.stories)
    print(f"wrote {args.stories} stories to {path} ({path.stat().st_size:,} bytes compressed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
