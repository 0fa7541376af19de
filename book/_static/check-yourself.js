// Grades the value exercises in the static book, with no kernel: the same data and the same
// rules as lib/checks.py (window.BOOK_EXERCISES comes from `python -m lib.checks --export-js`,
// with the grader's own tolerance: whole answers, stated decimals, the feedback of each rule).
// A page asks for one with <div class="check-yourself" data-exercise="1.equal-scores"></div>.
(function () {
  "use strict";

  function flatten(value) {
    return Array.isArray(value) ? value.flatMap(flatten) : [value];
  }

  // --- reading what was typed --------------------------------------------------------------
  // The notebook's check() gets a Python value, so the box reads the text as Python reads it in
  // `check(id, <text>)`: numbers as Python writes them (393_216, 1e-3, .5, 5., 0x10; not 010 or
  // 1_), a sign with or without a space (- 0.87), * and / between numbers (8/3), True and False
  // in a list, lists and tuples whose brackets pair up, with the shape rules of as_numbers in
  // lib/safe_call.py (a grid typed flat, extra brackets). Beyond Python it reads what people type
  // on a page: numbers separated by spaces or semicolons as a list (so numpy's printout
  // [[1. 0.] [0. 1.]] too), the Unicode minus, and, where one number is asked for, 146,240 with a
  // thousands separator. What it cannot read as Python would (1 - 2: a subtraction, or 1 and -2?;
  // 2**10; [1] * 3; 1j) it refuses, and says why.
  const DIGITS = "\\d(?:_?\\d)*";
  const POINT = `(?:(?:${DIGITS})?\\.${DIGITS}|${DIGITS}\\.)`;
  const LITERAL = new RegExp(
    "^(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+" +
      `|(?:${POINT}|${DIGITS})[eE][+-]?${DIGITS}|${POINT}|[1-9](?:_?\\d)*|0+(?:_?0)*)`
  );
  const BASES = { x: 16, o: 8, b: 2 };
  const THOUSANDS = /^\s*(\[|\()?\s*([+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?)\s*(\]|\))?\s*$/;

  class Unreadable extends Error {}

  function literalValue(text) {
    const plain = text.replace(/_/g, "");
    const base = BASES[plain.charAt(1).toLowerCase()];
    return plain.charAt(0) === "0" && base ? parseInt(plain.slice(2), base) : Number(plain);
  }

  // The text as a tree: {value, bool} for a number (bool: a bare True or False), {items} for a
  // list or tuple. Throws Unreadable, with the reason, on what Python would not read the same.
  function readTree(text) {
    const s = text.replace(/\u2212/g, "-");
    let i = 0;
    const fail = (why) => { throw new Unreadable(why); };
    const spaces = () => {
      const start = i;
      while (i < s.length && /\s/.test(s[i])) i++;
      return i > start;
    };

    function atom() {
      spaces();
      const c = s[i];
      if (c === "+" || c === "-") {
        i++;
        const inner = atom();
        return { value: c === "-" ? -inner.value : inner.value, bool: false };
      }
      if (c === "(") {
        const group = bracketed("(", ")");
        if (group.items) fail("a tuple cannot be signed, multiplied or divided");
        return group;
      }
      if (c === "[") fail("a list cannot be signed, multiplied or divided");
      const word = /^(True|False)(?![\w.])/.exec(s.slice(i));
      if (word) {
        i += word[1].length;
        return { value: word[1] === "True" ? 1 : 0, bool: true };
      }
      const literal = LITERAL.exec(s.slice(i));
      if (!literal) fail(i < s.length ? `no number at "${s.slice(i, i + 10)}"` : "a number is missing at the end");
      i += literal[0].length;
      if (/^[jJ]/.test(s.slice(i))) fail("complex numbers are not read here");
      if (/^[\w.]/.test(s.slice(i))) fail(`"${literal[0]}${s.slice(i, i + 6)}" is not a number as Python writes one`);
      return { value: literalValue(literal[0]), bool: false };
    }

    function product() {
      let left = atom();
      for (;;) {
        const start = i;
        spaces();
        const op = s[i];
        if (op !== "*" && op !== "/") {
          i = start;
          return left;
        }
        if (s[i + 1] === op) fail(`${op}${op} is not read here: work the answer out`);
        i++;
        const right = atom();
        left = { value: op === "*" ? left.value * right.value : left.value / right.value, bool: false };
      }
    }

    function item() {
      spaces();
      if (s[i] === "[") return bracketed("[", "]");
      if (s[i] === "(") {
        const start = i;
        const group = bracketed("(", ")");
        if (group.items) return group;
        i = start;  // a number in parentheses, (8/3), which may go on: (8/3) * 2
      }
      return product();
    }

    // Items separated by commas, semicolons or spaces, up to `close` ("": the end of the text).
    function sequence(close) {
      const items = [];
      let comma = false;
      for (;;) {
        const spaced = spaces();
        const c = s[i];
        if (i >= s.length) {
          if (close) fail(`a closing "${close}" is missing`);
          return { items: items, comma: comma };
        }
        if (c === close) return { items: items, comma: comma };
        if (c === "]" || c === ")") fail(close ? `"${c}" where "${close}" should close the bracket` : `"${c}" closes a bracket that was not opened`);
        if (c === "," || c === ";") {
          if (items.length === 0 || comma) fail(`"${c}" with no number before it`);
          comma = true;
          i++;
          continue;
        }
        if (items.length > 0 && !comma) {
          if ((c === "+" || c === "-") && (!spaced || /\s/.test(s[i + 1] || ""))) {
            fail(`"${c}" between two numbers: Python reads ${c === "-" ? "a subtraction" : "a sum"} there. ` +
              "Type its result, or separate the numbers with a comma");
          }
          if (!spaced) fail(`"${s.slice(i, i + 6)}" follows a number with no comma or space between`);
        }
        items.push(item());
        comma = false;
      }
    }

    function bracketed(open, close) {
      i++;  // the opening bracket
      const inner = sequence(close);
      i++;  // the closing one
      return open === "(" && inner.items.length === 1 && !inner.comma ? inner.items[0] : { items: inner.items };
    }

    const top = sequence("");
    if (top.items.length === 0) fail("no number in it");
    return top.items.length === 1 && !top.comma ? top.items[0] : { items: top.items };
  }

  // The shape of a nested list, as numpy gives it; Unreadable when the rows differ in length.
  function shapeOf(tree) {
    if (!Array.isArray(tree) && !tree.items) return [];
    const items = Array.isArray(tree) ? tree : tree.items;
    const shapes = items.map(shapeOf);
    if (shapes.some((shape) => shape.join() !== shapes[0].join())) throw new Unreadable("its rows differ in length");
    return [items.length].concat(shapes.length ? shapes[0] : []);
  }

  function leaves(tree) {
    return tree.items ? tree.items.flatMap(leaves) : [tree.value];
  }

  // {numbers, shape} read from the text, or {problem}: why it cannot be read as numbers. When
  // one number is expected (single), "146,240" reads as 146240: a comma between groups of
  // exactly three digits is a thousands separator there, and a list needs more than one number.
  function readAnswer(text, single) {
    const thousands = single ? THOUSANDS.exec(text.replace(/\u2212/g, "-")) : null;
    if (thousands && (thousands[1] || "") + (thousands[3] || "") in { "": 1, "[]": 1, "()": 1 }) {
      return { numbers: [Number(thousands[2].replace(/,/g, ""))], shape: thousands[1] === "[" ? [1] : [] };
    }
    try {
      const tree = readTree(text);
      if (!tree.items && tree.bool) return { problem: "expected numbers but got a bool" };
      return { numbers: leaves(tree), shape: shapeOf(tree) };
    } catch (error) {
      if (error instanceof Unreadable) return { problem: error.message };
      throw error;
    }
  }

  // The numbers in the text, flat, or null when it does not read as numbers.
  function parseNumbers(text, single) {
    const read = readAnswer(text, single);
    return read.problem ? null : read.numbers;
  }

  // Whether an answer of `shape` is read as `expected` (lib/safe_call.py's as_numbers): the same
  // shape, a grid typed as one flat list, or the same numbers in extra brackets ([[1, 2]]).
  function fits(shape, expected) {
    const size = (dims) => dims.reduce((a, b) => a * b, 1);
    if (shape.join() === expected.join()) return true;
    if (size(shape) !== size(expected)) return false;
    if (expected.length > 1 && shape.length === 1) return true;
    return shape.filter((d) => d !== 1).join() === expected.filter((d) => d !== 1).join();
  }

  function shapeText(shape) {
    return `(${shape.join(", ")}${shape.length === 1 ? "," : ""})`;
  }

  function close(answer, target, atol, rtol) {
    const flat = flatten(target);
    return answer.length === flat.length &&
      answer.every((x, i) => Math.abs(x - flat[i]) <= atol + rtol * Math.abs(flat[i]));
  }

  // How many decimals a number was given with: 4 -> 0, -0.73 -> 2 (lib/value_grading.py's given_decimals).
  function givenDecimals(x) {
    for (let d = 0; d < 10; d++) {
      const scale = Math.pow(10, d);
      if (Math.abs(x - Math.round(x * scale) / scale) <= 1e-11 * Math.max(1, Math.abs(x))) return d;
    }
    return 10;
  }

  // [rounded, cut off]: whether the answer is the target rounded, or cut off, to the decimals each
  // number was given with, where those are fewer than asked (for a count: any).
  function readAsGiven(exercise, numbers, given, target) {
    const flat = flatten(target);
    let rounded = true;
    let cutOff = true;
    numbers.forEach((x, i) => {
      const v = flat[i];
      const coarse = exercise.whole ? given[i] > 0 : exercise.decimals !== null && given[i] < exercise.decimals;
      const half = 0.5 * Math.pow(10, -given[i]) * (1 + 1e-6);
      const asked = Math.abs(x - v) <= exercise.atol;
      const digit = x !== 0 || Math.abs(v) <= exercise.atol;
      const r = asked || (coarse && digit && Math.abs(x - v) <= half);
      const scale = Math.pow(10, given[i]);
      const cut = Math.abs(x - Math.trunc(v * scale * (1 + 1e-12)) / scale) <= 1e-9 * Math.max(1, Math.abs(x));
      rounded = rounded && r;
      cutOff = cutOff && (r || (digit && cut && exercise.decimals !== null && given[i] <= exercise.decimals));
    });
    if (exercise.whole) return [rounded, false];
    if (exercise.decimals === null) return [false, false];
    return [rounded, cutOff];
  }

  function grade(exercise, text) {
    const hint = exercise.hints.length ? exercise.hints[0] : "";
    if (text.trim() === "") return { status: "not attempted", message: "type your answer first" };
    const size = flatten(exercise.expected).length;
    const expectedShape = shapeOf(exercise.expected);
    const read = readAnswer(text, size === 1);
    if (read.problem) {
      return { status: "incorrect", message: `expected numbers: ${exercise.placeholder} (${read.problem})`, hint: hint };
    }
    const numbers = read.numbers;
    if (!fits(read.shape, expectedShape)) {
      const want = size === 1 ? "one number" : `${size} numbers` + (expectedShape.length > 1 ? `, shape ${shapeText(expectedShape)}` : "");
      const got = read.shape.length === 0 ? "one number" : `${numbers.length} number${numbers.length === 1 ? "" : "s"}` +
        (read.shape.length > 1 ? `, shape ${shapeText(read.shape)}` : "");
      return { status: "incorrect", message: `expected ${want}, got ${got}`, hint: hint };
    }
    if (!numbers.every(Number.isFinite)) return { status: "incorrect", message: "the answer is not finite", hint: hint };
    if (close(numbers, exercise.expected, exercise.atol, exercise.rtol)) {
      return { status: "correct", message: "that is right.", explanation: exercise.explanation };
    }
    const wrong = (feedback) => ({ status: "incorrect", message: "not quite.", feedback: feedback, hint: hint });
    const known = exercise.wrong_answers.find((w) => close(numbers, w.value, exercise.atol, exercise.rtol));
    if (known) return wrong(known.feedback);
    const given = numbers.map(givenDecimals);
    const [rightRounded, rightCut] = readAsGiven(exercise, numbers, given, exercise.expected);
    // Whether an entry given with fewer decimals than asked is needed to read the answer as target.
    const coarser = (target) => {
      const flat = flatten(target);
      return exercise.decimals !== null &&
        numbers.some((x, i) => given[i] < exercise.decimals && Math.abs(x - flat[i]) > exercise.atol);
    };
    if (exercise.decimals !== null) {  // the right answer cut off at the precision asked for: 8.95 for 8.955
      const scale = Math.pow(10, exercise.decimals);
      const flat = flatten(exercise.expected);
      if (numbers.every((x, i) => Math.abs(x - Math.trunc(flat[i] * scale * (1 + 1e-12)) / scale) <= 1e-9)) {
        return wrong(exercise.truncated_rule);
      }
    }
    if (rightRounded && coarser(exercise.expected)) return wrong(exercise.rule);
    const named = exercise.wrong_answers.find((w) => readAsGiven(exercise, numbers, given, w.value).some((x) => x));
    if (named) return wrong(coarser(named.value) ? `${named.feedback} ${exercise.coarse_note}` : named.feedback);
    if (rightCut) return wrong(coarser(exercise.expected) ? exercise.rule : exercise.truncated_rule);
    if (exercise.whole && !numbers.every((x) => Math.abs(x - Math.round(x)) <= exercise.whole_atol)) {
      return wrong(exercise.rule);
    }
    return wrong("");
  }

  function render(box, exercise) {
    const input = document.createElement("input");
    input.type = "text";
    input.placeholder = exercise.placeholder;
    input.setAttribute("aria-label", `answer to exercise ${exercise.id}`);
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "Check";
    const result = document.createElement("div");
    result.className = "check-yourself-result";
    button.addEventListener("click", () => {
      const outcome = grade(exercise, input.value);
      result.dataset.status = outcome.status;
      result.replaceChildren();
      const head = document.createElement("b");
      head.textContent = `${exercise.id}: ${outcome.status} `;
      result.append(head, document.createTextNode(outcome.message));
      for (const [label, text] of [["Feedback", outcome.feedback], ["Hint", outcome.hint], ["Why", outcome.explanation]]) {
        if (!text) continue;
        const line = document.createElement("div");
        line.textContent = `${label}: ${text}`;
        result.append(line);
      }
    });
    input.addEventListener("keydown", (event) => { if (event.key === "Enter") button.click(); });
    box.replaceChildren(input, button, result);
  }

  window.BookChecks = { grade: grade, parseNumbers: parseNumbers, readAnswer: readAnswer };  // for tests/test_static_checks.py

  document.addEventListener("DOMContentLoaded", () => {
    const byId = new Map((window.BOOK_EXERCISES || []).map((exercise) => [exercise.id, exercise]));
    for (const box of document.querySelectorAll(".check-yourself[data-exercise]")) {
      const exercise = byId.get(box.dataset.exercise);
      if (exercise) render(box, exercise);
      else box.textContent = `(exercise ${box.dataset.exercise} is graded in the notebook)`;
    }
  });
})();
