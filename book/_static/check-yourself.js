// Grades the value exercises in the static book, with no kernel: the same data and the same
// rules as lib/checks.py (window.BOOK_EXERCISES comes from `python -m lib.checks --export-js`).
// A page asks for one with <div class="check-yourself" data-exercise="1.equal-scores"></div>.
(function () {
  "use strict";

  function flatten(value) {
    return Array.isArray(value) ? value.flatMap(flatten) : [value];
  }

  // "[1, 2]", "1 2", "(1,2)", "64" -> [1, 2] / [64]; null when something is not a number.
  function parseNumbers(text) {
    const parts = text.replace(/[\[\]()]/g, " ").split(/[\s,;]+/).filter((p) => p.length > 0);
    if (parts.length === 0) return null;
    const numbers = parts.map(Number);
    return numbers.some((x) => Number.isNaN(x)) ? null : numbers;
  }

  function close(answer, target, exercise) {
    const flat = flatten(target);
    return answer.length === flat.length &&
      answer.every((x, i) => Math.abs(x - flat[i]) <= exercise.atol + exercise.rtol * Math.abs(flat[i]));
  }

  function grade(exercise, text) {
    const hint = exercise.hints.length ? exercise.hints[0] : "";
    if (text.trim() === "") return { status: "not attempted", message: "type your answer first" };
    const numbers = parseNumbers(text);
    const size = flatten(exercise.expected).length;
    if (numbers === null) return { status: "incorrect", message: "expected numbers, such as 0.5, 0.5", hint: hint };
    if (numbers.length !== size) {
      return { status: "incorrect", message: `expected ${size} number(s), got ${numbers.length}`, hint: hint };
    }
    if (!numbers.every(Number.isFinite)) return { status: "incorrect", message: "the answer is not finite", hint: hint };
    if (close(numbers, exercise.expected, exercise)) {
      return { status: "correct", message: "that is right.", explanation: exercise.explanation };
    }
    const known = exercise.wrong_answers.find((wrong) => close(numbers, wrong.value, exercise));
    return { status: "incorrect", message: "not quite.", feedback: known ? known.feedback : "", hint: hint };
  }

  function render(box, exercise) {
    const input = document.createElement("input");
    input.type = "text";
    input.placeholder = "your answer, e.g. 0.5, 0.5";
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
