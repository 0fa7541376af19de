// Grades the value exercises in the static book, with no kernel: the same data and the same
// rules as lib/checks.py (window.BOOK_EXERCISES comes from `python -m lib.checks --export-js`,
// with the grader's own tolerance: whole answers, stated decimals, the feedback of each rule).
// A page asks for one with <div class="check-yourself" data-exercise="1.equal-scores"></div>.
(function () {
  "use strict";

  function flatten(value) {
    return Array.isArray(value) ? value.flatMap(flatten) : [value];
  }

  // One number as people type it: "0.5", "-8" or "−8" (the Unicode minus the text uses), "8/3".
  function parseOne(part) {
    const fraction = /^([^/]+)\/([^/]+)$/.exec(part);
    if (fraction) {
      const top = Number(fraction[1]);
      const bottom = Number(fraction[2]);
      return Number.isNaN(top) || Number.isNaN(bottom) ? NaN : top / bottom;
    }
    return Number(part);
  }

  // "[1, 2]", "1 2", "(1,2)", "1;2", "64", "8/3", "−8" -> numbers; null when something is not a
  // number. When one number is expected (single), "146,240" reads as 146240: a comma between
  // groups of exactly three digits is a thousands separator there, and a list needs more than one.
  function parseNumbers(text, single) {
    let cleaned = text.replace(/\u2212/g, "-").replace(/\s*\/\s*/g, "/").trim();
    const bare = cleaned.replace(/[\[\]()]/g, "").trim();
    if (single && /^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$/.test(bare)) cleaned = bare.replace(/,/g, "");
    const parts = cleaned.replace(/[\[\]()]/g, " ").split(/[\s,;]+/).filter((p) => p.length > 0);
    if (parts.length === 0) return null;
    const numbers = parts.map(parseOne);
    return numbers.some((x) => Number.isNaN(x)) ? null : numbers;
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
    const numbers = parseNumbers(text, size === 1);
    if (numbers === null) {
      return { status: "incorrect", message: `expected numbers: ${exercise.placeholder}`, hint: hint };
    }
    if (numbers.length !== size) {
      return { status: "incorrect", message: `expected ${size} number(s), got ${numbers.length}`, hint: hint };
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

  window.BookChecks = { grade: grade, parseNumbers: parseNumbers };  // for tests/test_static_checks.py

  document.addEventListener("DOMContentLoaded", () => {
    const byId = new Map((window.BOOK_EXERCISES || []).map((exercise) => [exercise.id, exercise]));
    for (const box of document.querySelectorAll(".check-yourself[data-exercise]")) {
      const exercise = byId.get(box.dataset.exercise);
      if (exercise) render(box, exercise);
      else box.textContent = `(exercise ${box.dataset.exercise} is graded in the notebook)`;
    }
  });
})();
