// The three playgrounds, live on the static page (no kernel): each re-expresses the pure
// function of its lib/playgrounds module in a few lines, with the same controls, and prints
// the same lines as that module's describe function.
//
//   <div class="live-playground" data-playground="self-attention"></div>   chapter 1
//   <div class="live-playground" data-playground="rope"></div>             chapter 3
//   <div class="live-playground" data-playground="complexity"></div>       chapter 5
//
// A chapter puts the placeholder right after the playground's static figure. Each control
// has a data-control name; the printed lines are in <pre data-readout>, and the numbers
// behind them, unrounded, in data-* attributes of that element (JSON), so that
// tests/test_browser.py can set the controls and compare with the Python function.
//
// The pure functions (no DOM) are window.BookPlaygrounds in a browser and module.exports
// under Node, where tests/test_playgrounds_page.py compares them with lib.playgrounds on a
// grid of thousands of settings. The complexity playground's recorded CPU times come from
// window.BOOK_PLAYGROUND_DATA (playground-data.js, written from chapters/results/*.csv when
// the book is built, by book/_ext/book_offline.py).
(function () {
  "use strict";

  // --- formatting as Python's f"{x:.{d}f}", f"{n:,}" and f"{x:.2%}" ------------------------

  // Python prints the exact decimal value of the double, rounded half to even (toFixed
  // rounds an exact tie up, and writes 1e21 and above in exponent form).
  function fixed(x, digits) {
    if (Number.isNaN(x)) return "nan";
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    const negative = x < 0 || Object.is(x, -0);
    const magnitude = Math.abs(x);
    if (magnitude >= 1e21) {
      // every double this large is a whole number: BigInt writes its exact digits
      return (negative ? "-" : "") + BigInt(magnitude).toString() + (digits > 0 ? "." + "0".repeat(digits) : "");
    }
    let text = magnitude.toFixed(digits);
    const exact = magnitude.toFixed(100);
    const point = exact.indexOf(".");
    const tail = exact.slice(point + 1 + digits);
    if (/^50*$/.test(tail)) {
      const kept = exact.slice(0, digits > 0 ? point + 1 + digits : point);
      if (Number(kept.slice(-1)) % 2 === 0) text = kept;
    }
    return (negative ? "-" : "") + text;
  }

  function grouped(text) {
    const [whole, fraction] = text.split(".");
    const sign = whole.startsWith("-") ? "-" : "";
    const digits = whole.replace("-", "").replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return sign + digits + (fraction === undefined ? "" : "." + fraction);
  }

  const integer = (n) => grouped(String(n));
  const percent = (x) => fixed(x * 100, 2) + "%";

  // --- small DOM helpers -------------------------------------------------------------------

  function element(tag, attributes, children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value);
    }
    for (const child of children || []) node.appendChild(child);
    return node;
  }

  function labelled(text, control) {
    return element("label", { class: "playground-control" }, [document.createTextNode(text + " "), control]);
  }

  function select(name, options, value) {
    const node = element("select", { "data-control": name });
    for (const [label, optionValue] of options) {
      node.appendChild(element("option", { value: String(optionValue), text: label }));
    }
    node.value = String(value);
    return node;
  }

  function range(name, min, max, step, value) {
    return element("input", { type: "range", "data-control": name, min, max, step, value: String(value) });
  }

  function readout() {
    return element("pre", { class: "playground-readout", "data-readout": "", "aria-live": "polite" });
  }

  function frame(root, title, rows, figure, out) {
    root.classList.add("live-playground-mounted");
    root.replaceChildren(
      element("p", { class: "playground-title", text: title }),
      ...rows.map((row) => element("div", { class: "playground-row" }, row)),
      out,
      figure || document.createComment("no figure"),
    );
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attributes) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
    return node;
  }

  // --- chapter 1: self-attention (lib/playgrounds/__init__.py) -----------------------------

  const EXAMPLE_KEYS = [[1, 0], [0, 1]];
  const EXAMPLE_VALUES = [[2, 0], [0, 4]];
  const EXAMPLE_QUERIES = [[1, 0], [0, 1]];
  const SCALINGS = ["1/√d_k", "none", "temperature"];

  function scoreScale(scaling, dK, temperature) {
    if (scaling === "1/√d_k") return 1 / Math.sqrt(dK);
    if (scaling === "none") return 1;
    return 1 / temperature;
  }

  // lib.attention.softmax: shift by the row's maximum when it is finite (else by 0), and
  // divide by the sum when it is positive (else by 1): a fully masked row reads nothing.
  function softmax(scores) {
    const top = Math.max(...scores);
    const shift = Number.isFinite(top) ? top : 0;
    const exps = scores.map((s) => Math.exp(s - shift));
    const total = exps.reduce((a, b) => a + b, 0);
    return exps.map((e) => e / (total > 0 ? total : 1));
  }

  // self_attention_read: the query at `position` reads the keys it may (all, or 0..position).
  function selfAttentionRead(query, position, scaling, temperature, causal) {
    const keys = EXAMPLE_KEYS;
    const values = EXAMPLE_VALUES;
    const scale = scoreScale(scaling, keys[0].length, temperature);
    const allowed = keys.map((_, j) => !causal || j <= position);
    const dot = keys.map((key) => key.reduce((sum, k, i) => sum + k * query[i], 0));
    const scores = dot.map((x, j) => (allowed[j] ? x * scale : -Infinity));
    const weights = softmax(scores);
    const output = values[0].map((_, i) => weights.reduce((sum, w, j) => sum + w * values[j][i], 0));
    return { query, position, scale, allowed, dot, scores, weights, output };
  }

  // 10.0 ** -d as Python computes it (V8's Math.pow(10, -4) is 0.00009999999999999999)
  const TENTH_POWERS = [1, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10];

  // decimals_needed: no entry other than exactly 0 or 1 reads as 0 or 1, and small entries
  // keep two significant digits.
  function decimalsNeeded(lists, start = 4, most = 8) {
    const numbers = lists.flat().filter((x) => Number.isFinite(x));
    for (let digits = start; digits <= most; digits++) {
      const step = TENTH_POWERS[digits];
      const ok = numbers.every(
        (x) => x === 0 || x === 1 || (Math.abs(x) >= 10 * step && Math.abs(Math.abs(x) - 1) >= step / 2),
      );
      if (ok) return digits;
    }
    return most;
  }

  function describeRead(read) {
    const digits = decimalsNeeded([read.dot, read.scores, read.weights, read.output]);
    const list = (xs) => "[" + xs.map((x) => (x === -Infinity ? "-inf" : fixed(x, digits))).join(", ") + "]";
    const sum = read.weights.reduce((a, b) => a + b, 0);
    return [
      `dot products ${list(read.dot)}`,
      `scores       ${list(read.scores)}   (dot products × ${fixed(read.scale, 4)})`,
      `weights      ${list(read.weights)}   (sum ${fixed(sum, 4)})`,
      `output       ${list(read.output)}`,
    ].join("\n");
  }

  // What the notebook's FloatText makes of a box's text: a number, or null where the box
  // holds none (blank, "-", "1e", or beyond a double's range: an <input type="number">
  // then reports ""). The widget keeps its last number and puts it back in the box when
  // the entry is done (its change event); it never sends -0 (JSON has none).
  function boxNumber(text) {
    const trimmed = String(text).trim();
    if (trimmed === "") return null;
    const value = Number(trimmed);
    return Number.isFinite(value) ? value + 0 : null;
  }

  function mountSelfAttention(root) {
    const token = select("position", [["token 1", 0], ["token 2", 1]], 0);
    const qx = element("input", { type: "number", step: "0.1", "data-control": "qx", value: "1" });
    const qy = element("input", { type: "number", step: "0.1", "data-control": "qy", value: "0" });
    const causal = element("input", { type: "checkbox", "data-control": "causal" });
    const scaling = select("scaling", SCALINGS.map((s) => [s, s]), SCALINGS[0]);
    // FloatLogSlider(base=10, min=-1, max=1, step=0.05, value=√2), as in the notebook
    const temperature = range("temperature", -1, 1, 0.05, Math.log10(Math.SQRT2));
    temperature.disabled = true;
    const temperatureText = element("span", { "data-shows": "temperature" });
    let temperatureValue = Math.SQRT2; // until the slider moves, exactly √2
    const boxes = [
      { name: "q[0]", box: qx, value: 1 },
      { name: "q[1]", box: qy, value: 0 },
    ];
    const warning = element("p", { class: "playground-warning", "data-warning": "", role: "status" });
    const out = readout();
    const bars = element("div", { class: "playground-bars" });

    // As the notebook's FloatText (continuous_update=False): a box's number is applied when
    // the entry is done (Enter, or leaving the box). A box whose text is no number keeps its
    // last number and gets it back then; while the text is unfinished, the page says so.
    function showUnread() {
      const unread = boxes.filter((entry) => entry.box.validity.badInput || boxNumber(entry.box.value) === null);
      warning.textContent = unread
        .map(({ name, value }) => `${name} is not a number: the lines below are for ${name} = ${value}`)
        .join("; ");
      warning.hidden = unread.length === 0;
    }

    function update() {
      showUnread();
      const query = boxes.map((entry) => entry.value);
      const position = Number(token.value);
      const read = selfAttentionRead(query, position, scaling.value, temperatureValue, causal.checked);
      out.textContent = describeRead(read);
      out.dataset.state = JSON.stringify({
        query, position, scaling: scaling.value, temperature: temperatureValue, causal: causal.checked,
      });
      out.dataset.values = JSON.stringify({
        dot_products: read.dot,
        scores: read.scores.map((s) => (s === -Infinity ? null : s)), // JSON has no -inf: null = masked
        weights: read.weights,
        output: read.output,
        scale: read.scale,
      });
      temperatureText.textContent = temperatureValue.toPrecision(3);
      bars.replaceChildren(
        ...read.weights.map((w, j) =>
          element("div", { class: "playground-bar-row" }, [
            element("span", { text: `key ${j + 1}${read.allowed[j] ? "" : " (masked)"}` }),
            element("span", { class: "playground-bar", style: `width: ${(100 * w).toFixed(1)}%` }),
          ]),
        ),
      );
    }

    token.addEventListener("change", () => {
      boxes.forEach((entry, i) => {
        entry.value = EXAMPLE_QUERIES[Number(token.value)][i];
        entry.box.value = String(entry.value);
      });
      update();
    });
    scaling.addEventListener("change", () => {
      temperature.disabled = scaling.value !== "temperature";
      update();
    });
    temperature.addEventListener("input", () => {
      temperatureValue = Math.pow(10, Number(temperature.value));
      update();
    });
    causal.addEventListener("change", update);
    for (const entry of boxes) {
      entry.box.title = "Enter, or leaving the box, applies the number (as in the notebook)";
      entry.box.addEventListener("input", showUnread);
      entry.box.addEventListener("change", () => {
        const value = entry.box.validity.badInput ? null : boxNumber(entry.box.value);
        if (value === null) entry.box.value = String(entry.value); // the last number, back in the box
        else entry.value = value;
        update();
      });
    }

    frame(
      root,
      "Live: the self-attention playground (runs in this page)",
      [
        [labelled("query of", token), labelled("q[0]", qx), labelled("q[1]", qy), labelled("causal mask", causal)],
        [labelled("scaling", scaling), labelled("temperature", temperature), temperatureText],
        [warning],
      ],
      element("div", { class: "playground-figure" }, [element("p", { text: "weights (softmax)" }), bars]),
      out,
    );
    update();
  }

  // --- chapter 3: RoPE (lib/playgrounds/rope.py) -------------------------------------------

  const EXAMPLE_FREQUENCY = Math.PI / 4;
  const EXAMPLE_VECTOR = [1, 0];

  function rotate([x, y], angle) {
    const c = Math.cos(angle);
    const s = Math.sin(angle);
    return [x * c - y * s, x * s + y * c];
  }

  const dot2 = (a, b) => a[0] * b[0] + a[1] * b[1];

  const FREQUENCY_STEPS = 64;
  const frequencyAt = (steps) => (steps * Math.PI) / FREQUENCY_STEPS; // steps · π/64, exactly π at 64

  // rope_read: q turned to position m, k to position n, and the same score from the gap alone.
  function ropeRead(m, n, frequency, query = EXAMPLE_VECTOR, key = EXAMPLE_VECTOR) {
    const rotatedQuery = rotate(query, m * frequency);
    const rotatedKey = rotate(key, n * frequency);
    return {
      m, n, frequency, rotatedQuery, rotatedKey,
      score: dot2(rotatedQuery, rotatedKey),
      scoreFromGap: dot2(query, rotate(key, (n - m) * frequency)),
    };
  }

  function describeRope(read) {
    const vector = (v) => "[" + v.map((x) => fixed(x, 4)).join(", ") + "]";
    return [
      `positions m=${read.m}, n=${read.n}, gap n-m=${read.n - read.m}, frequency ${fixed(read.frequency, 4)} rad/position`,
      `R_m q = ${vector(read.rotatedQuery)}   (q turned by ${fixed(read.m * read.frequency, 4)} rad)`,
      `R_n k = ${vector(read.rotatedKey)}   (k turned by ${fixed(read.n * read.frequency, 4)} rad)`,
      `score (R_m q)·(R_n k) = ${fixed(read.score, 4)}`,
      `q·R_(n-m) k           = ${fixed(read.scoreFromGap, 4)}   (from the gap alone)`,
    ].join("\n");
  }

  function mountRope(root) {
    const maxPosition = 40;
    const maxGap = 12;
    const m = range("m", 0, maxPosition, 1, 1);
    const n = range("n", 0, maxPosition + maxGap, 1, 2);
    const gap = range("gap", -maxGap, maxGap, 1, 1);
    // The notebook's FloatSlider(min=0, max=π, step=π/64): its grid is k·π/64 for k = 0..64,
    // π included. A range input in radians would stop at 63π/64 (the browser rounds
    // π / (π/64) below 64), so this one counts steps of π/64.
    const frequency = range("frequency", 0, FREQUENCY_STEPS, 1, FREQUENCY_STEPS / 4);
    const shown = {};
    for (const name of ["m", "n", "gap", "frequency"]) shown[name] = element("span", { "data-shows": name });
    let frequencyValue = EXAMPLE_FREQUENCY; // π/4, 16 steps of π/64
    const out = readout();
    const plane = svg("svg", { viewBox: "-1.3 -1.3 2.6 2.6", width: "180", height: "180", role: "img" });

    function update() {
      const read = ropeRead(Number(m.value), Number(n.value), frequencyValue);
      out.textContent = describeRope(read);
      out.dataset.state = JSON.stringify({ m: read.m, n: read.n, frequency: frequencyValue });
      out.dataset.values = JSON.stringify({
        rotated_query: read.rotatedQuery, rotated_key: read.rotatedKey, score: read.score,
        score_from_gap: read.scoreFromGap,
      });
      shown.m.textContent = m.value;
      shown.n.textContent = n.value;
      shown.gap.textContent = gap.value;
      shown.frequency.textContent = fixed(frequencyValue, 4);
      plane.setAttribute("aria-label", `R_m q and R_n k on the unit circle: score ${fixed(read.score, 4)}`);
      const arrow = ([x, y], color) => svg("line", { x1: 0, y1: 0, x2: x, y2: -y, stroke: color, "stroke-width": 0.05 });
      plane.replaceChildren(
        svg("circle", { cx: 0, cy: 0, r: 1, fill: "none", stroke: "gray", "stroke-width": 0.01 }),
        arrow(read.rotatedQuery, "#1f77b4"),
        arrow(read.rotatedKey, "#ff7f0e"),
      );
    }

    // As the notebook's sliders: moving m carries n along (the gap stays); moving n or the
    // gap changes the other.
    m.addEventListener("input", () => {
      n.value = String(Number(m.value) + Number(gap.value));
      gap.value = String(Number(n.value) - Number(m.value)); // n is clipped to its range
      update();
    });
    n.addEventListener("input", () => {
      gap.value = String(Number(n.value) - Number(m.value));
      n.value = String(Number(m.value) + Number(gap.value)); // the gap is clipped to ±12
      update();
    });
    gap.addEventListener("input", () => {
      n.value = String(Number(m.value) + Number(gap.value));
      gap.value = String(Number(n.value) - Number(m.value));
      update();
    });
    frequency.addEventListener("input", () => {
      frequencyValue = frequencyAt(Number(frequency.value));
      update();
    });

    frame(
      root,
      "Live: the RoPE playground (runs in this page)",
      [
        [labelled("query position m", m), shown.m, labelled("key position n", n), shown.n],
        [labelled("gap n − m", gap), shown.gap, labelled("frequency (rad/position)", frequency), shown.frequency],
      ],
      element("div", { class: "playground-figure" }, [plane]),
      out,
    );
    update();
  }

  // --- chapter 5: attention complexity (lib/playgrounds/complexity.py, lib/costs.py) -------

  const SIZES = Array.from({ length: 10 }, (_, p) => Math.pow(2, p + 8)); // N = 256 .. 131072
  const PATTERNS = ["dense", "causal", "window", "global+local", "linear"];
  const LABELS = {
    dense: "dense", causal: "causal", window: "windowed", "global+local": "sparse/global", linear: "linear (elu+1)",
  };
  const HEADS = 8;
  const HEAD_DIM = 64;

  function windowPairs(n, window) {
    const w = Math.min(window, n);
    return (w * (w + 1)) / 2 + (n - w) * w;
  }

  function globalLocalPairs(n, window, nGlobal) {
    const radius = window - 1;
    const r = Math.min(radius, n - 1);
    const band = n + 2 * (r * n - (r * (r + 1)) / 2); // |i - j| <= radius
    const g = Math.min(nGlobal, n);
    let inRows = 0;
    let inBlock = 0;
    for (let i = 0; i < g; i++) {
      inRows += Math.min(n, i + radius + 1) - Math.max(0, i - radius);
      inBlock += Math.min(g, i + radius + 1) - Math.max(0, i - radius);
    }
    return band + (2 * g * n - g * g) - (2 * inRows - inBlock);
  }

  function patternPairs(pattern, n, window, nGlobal) {
    if (pattern === "dense") return n * n;
    if (pattern === "causal") return (n * (n + 1)) / 2;
    if (pattern === "window") return windowPairs(n, window);
    if (pattern === "global+local") return globalLocalPairs(n, window, nGlobal);
    return null; // linear attention forms no pairs
  }

  function patternFlops(pattern, n, window, nGlobal) {
    const pairs = patternPairs(pattern, n, window, nGlobal);
    if (pairs === null) {
      const d = HEAD_DIM;
      return HEADS * (2 * n * d * d + 2 * n * d * d + 2 * n * d);
    }
    return HEADS * 4 * pairs * HEAD_DIM;
  }

  // measured_times: the CPU times recorded for a pattern (label -> [[N, ms], ...], in the
  // order Python's dict keeps them) and a note on what is missing. `data` holds the rows of
  // chapters/results/attention_cpu.csv and attention_window_cpu.csv, as csv.DictReader reads
  // them (every value a string; null where a row is short).
  function recordedSeries(rows, impl, causal, window) {
    const points = rows
      .filter(
        (row) =>
          row.impl === impl &&
          row.causal === (causal ? "True" : "False") &&
          (window === undefined || row.window === String(window)) &&
          ("head_dim" in row ? row.head_dim : "64") === "64",
      )
      .map((row) => [parseInt(row.n, 10), Number(row.median_ms)]);
    return points.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  }

  function measuredTimes(pattern, window, data) {
    const denseRows = data.attention_cpu;
    const patternRows = data.attention_window_cpu;
    let series = [];
    let note = "";
    if (pattern === "dense" || pattern === "causal") {
      const causal = pattern === "causal";
      series = [
        [`tiled (${pattern})`, recordedSeries(denseRows, "tiled", causal)],
        [`torch SDPA (${pattern})`, recordedSeries(denseRows, "sdpa", causal)],
      ];
    } else if (pattern === "window") {
      const recorded = [
        ...new Set(patternRows.filter((row) => row.impl === "tiled-window").map((row) => parseInt(row.window, 10))),
      ].sort((a, b) => a - b);
      const points = recordedSeries(patternRows, "tiled-window", true, window);
      series = [[`windowed tiled (w=${window})`, points]];
      if (points.length === 0) {
        note = `no windowed run recorded at w=${window}` + (recorded.length ? ` (recorded: w=[${recorded.join(", ")}])` : "");
      }
    } else if (pattern === "linear") {
      series = [["linear, causal (chunked)", recordedSeries(patternRows, "linear-causal", true)]];
    } else {
      note = "no kernel here skips the sparse/global pattern's work: nothing measured";
    }
    if (pattern !== "dense") {
      // dense tiled for reference, from the same run as the pattern's where there is one
      const sameRun = pattern === "window" || pattern === "linear" ? patternRows : denseRows;
      const reference = recordedSeries(sameRun, "tiled", false);
      series.push(["tiled (dense, for reference)", reference.length ? reference : recordedSeries(denseRows, "tiled", false)]);
    }
    series = series.filter(([, points]) => points.length > 0);
    if (series.length === 0 && !note) {
      note = `no CPU results under ${data.results_name}/ (run python -m lib.bench attention)`;
    }
    return { series, note };
  }

  // complexity_curves and describe, for 8 heads of width 64 (the notebook's widget).
  function complexityCurves(pattern, n, window, nGlobal, data) {
    const pairs = pattern === "linear" ? null : SIZES.map((s) => patternPairs(pattern, s, window, nGlobal));
    const { series, note } = measuredTimes(pattern, window, data);
    return {
      pattern, n, window, nGlobal, sizes: SIZES, pairs,
      flops: SIZES.map((s) => patternFlops(pattern, s, window, nGlobal)),
      densePairs: SIZES.map((s) => patternPairs("dense", s)),
      denseFlops: SIZES.map((s) => patternFlops("dense", s, window, nGlobal)),
      pairsAtN: patternPairs(pattern, n, window, nGlobal),
      flopsAtN: patternFlops(pattern, n, window, nGlobal),
      doubling: patternFlops(pattern, 2 * n, window, nGlobal) / patternFlops(pattern, n, window, nGlobal),
      measured: series,
      note,
    };
  }

  function describeComplexity(curves) {
    const dense = curves.n * curves.n;
    const edges = curves.pairsAtN === null
      ? "no query-key pairs (a fixed-size summary of the keys instead)"
      : `${integer(curves.pairsAtN)} edges (${percent(curves.pairsAtN / dense)} of dense)`;
    const lines = [
      `${LABELS[curves.pattern]} at N = ${integer(curves.n)}: ${edges}`,
      `modeled attention FLOPs: ${grouped(fixed(curves.flopsAtN / 1e9, 2))} GFLOP; doubling N multiplies them by ` +
        fixed(curves.doubling, 2),
      "counts are a model of arithmetic, not measured latency",
    ];
    if (curves.note) lines.push(curves.note);
    return lines.join("\n");
  }

  // One log-log panel: each series is { label, points: [[x, y], ...], color, dashed }.
  function logLogPlot(title, xTicks, series, marked, emptyText) {
    const width = 360;
    const height = 220;
    const pad = 44;
    const all = series.flatMap((s) => s.points).filter(([x, y]) => x > 0 && y > 0);
    const xs = (all.length ? all.map(([x]) => x) : xTicks).map(Math.log10);
    const ys = all.length ? all.map(([, y]) => Math.log10(y)) : [0, 1];
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const px = (x) => pad + ((Math.log10(x) - x0) / (x1 - x0 || 1)) * (width - 2 * pad);
    const py = (v) => height - pad - ((Math.log10(v) - y0) / (y1 - y0 || 1)) * (height - 2 * pad);
    const plot = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: String(width), height: String(height) });
    plot.setAttribute("role", "img");
    plot.setAttribute(
      "aria-label",
      `${title}, log-log: ` + (series.length ? series.map((s) => s.label).join(", ") : emptyText),
    );
    plot.appendChild(svg("rect", { x: pad, y: pad / 2, width: width - 2 * pad, height: height - 1.5 * pad,
      fill: "none", stroke: "currentColor", "stroke-width": 0.5 }));
    for (const s of series) {
      const points = s.points.map(([x, y]) => `${px(x)},${py(y)}`).join(" ");
      plot.appendChild(svg("polyline", { points, fill: "none", stroke: s.color, "stroke-width": 2,
        "stroke-dasharray": s.dashed ? "5 3" : "none" }));
    }
    if (marked) plot.appendChild(svg("circle", { cx: px(marked[0]), cy: py(marked[1]), r: 5, fill: "#d62728" }));
    const text = (x, y, content, anchor) => {
      const node = svg("text", { x, y, "font-size": 11, fill: "currentColor", "text-anchor": anchor || "start" });
      node.textContent = content;
      return node;
    };
    plot.appendChild(text(width / 2, 12, title, "middle"));
    plot.appendChild(text(width / 2, height - 6, "sequence length N (log scale)", "middle"));
    for (const x of xTicks) plot.appendChild(text(px(x), height - pad + 12, integer(x), "middle"));
    if (all.length) {
      for (let power = Math.ceil(y0); power <= Math.floor(y1); power += y1 - y0 > 4 ? 2 : 1) {
        plot.appendChild(text(pad - 3, py(Math.pow(10, power)) + 4, `1e${power}`, "end"));
      }
    } else {
      plot.appendChild(text(width / 2, height / 2, emptyText, "middle"));
    }
    series.forEach((s, i) => plot.appendChild(text(pad + 4, pad / 2 + 12 + 12 * i, s.label, "start")));
    return plot;
  }

  const NO_DATA = { results_name: "results", attention_cpu: [], attention_window_cpu: [] };

  function mountComplexity(root) {
    const data = (typeof window !== "undefined" && window.BOOK_PLAYGROUND_DATA) || NO_DATA;
    if (data === NO_DATA) console.error("live playground: playground-data.js (the recorded CPU times) did not load");
    const pattern = select("pattern", PATTERNS.map((p) => [LABELS[p], p]), "window");
    const n = range("n", 0, SIZES.length - 1, 1, SIZES.indexOf(4096));
    const windowSlider = range("window", 1, 4096, 1, 256);
    const nGlobal = range("n_global", 0, 256, 1, 16);
    const shown = { n: element("span", { "data-shows": "n" }), window: element("span", { "data-shows": "window" }),
      n_global: element("span", { "data-shows": "n_global" }) };
    const out = readout();
    const figure = element("div", { class: "playground-figure" });
    const table = element("table", { class: "playground-table" });

    function update() {
      const p = pattern.value;
      const size = SIZES[Number(n.value)];
      const [w, g] = [Number(windowSlider.value), Number(nGlobal.value)];
      const curves = complexityCurves(p, size, w, g, data);
      out.textContent = describeComplexity(curves);
      out.dataset.state = JSON.stringify({ pattern: p, n: size, window: w, n_global: g });
      out.dataset.values = JSON.stringify({
        sizes: SIZES, pairs: curves.pairs, flops: curves.flops, dense_pairs: curves.densePairs,
        dense_flops: curves.denseFlops, pairs_at_n: curves.pairsAtN, flops_at_n: curves.flopsAtN,
        measured: curves.measured, note: curves.note,
      });
      shown.n.textContent = integer(size);
      shown.window.textContent = String(w);
      shown.n_global.textContent = String(g);
      const along = (values) => SIZES.map((s, i) => [s, values[i]]);
      const label = LABELS[p];
      const edges = p === "linear"
        ? []
        : [{ label: "dense", points: along(curves.densePairs), color: "gray", dashed: true },
          { label, points: along(curves.pairs), color: "#1f77b4" }];
      const flops = [{ label: "dense", points: along(curves.denseFlops), color: "gray", dashed: true },
        { label, points: along(curves.flops), color: "#1f77b4" }];
      const palette = ["#1f77b4", "#ff7f0e", "#2ca02c"];
      const times = curves.measured.map(([name, points], i) => ({
        label: name, points, color: name.includes("reference") ? "gray" : palette[i % palette.length],
        dashed: name.includes("reference"),
      }));
      const rows = SIZES.map((s, i) =>
        element("tr", {}, [
          element("td", { text: integer(s) }),
          element("td", { text: curves.pairs === null ? "no pairs" : integer(curves.pairs[i]) }),
          element("td", { text: integer(s * s) }),
          element("td", { text: fixed(curves.flops[i] / 1e9, 2) }),
        ]),
      );
      table.replaceChildren(
        element("tr", {}, ["N", `${label} edges`, "dense edges", "GFLOP"].map((h) => element("th", { text: h }))),
        ...rows,
      );
      const ticks = [256, 4096, 65536];
      const timeTicks = [...new Set(curves.measured.flatMap(([, points]) => points.map(([x]) => x)))].sort((a, b) => a - b);
      figure.replaceChildren(
        logLogPlot("allowed query-key pairs", ticks, edges, p === "linear" ? null : [size, curves.pairsAtN],
          "linear attention forms no pairs"),
        logLogPlot("modeled attention FLOPs", ticks, flops, [size, curves.flopsAtN], ""),
        logLogPlot("measured on a CPU (recorded), ms", timeTicks.length ? timeTicks : ticks, times, null,
          curves.note || "nothing recorded"),
        table,
      );
    }

    for (const control of [n, windowSlider, nGlobal]) control.addEventListener("input", update);
    pattern.addEventListener("change", update);

    frame(
      root,
      `Live: the attention-complexity playground (runs in this page; ${HEADS} heads of width ${HEAD_DIM})`,
      [
        [labelled("pattern", pattern), labelled("N (tokens)", n), shown.n],
        [labelled("window w", windowSlider), shown.window, labelled("global tokens g", nGlobal), shown.n_global],
      ],
      figure,
      out,
    );
    update();
  }

  const MOUNTS = { "self-attention": mountSelfAttention, rope: mountRope, complexity: mountComplexity };

  // The pure functions, for tests: tests/test_playgrounds_page.py runs them under Node.
  const pure = {
    fixed, grouped, integer, percent, boxNumber,
    selfAttentionRead, decimalsNeeded, describeRead,
    ropeRead, describeRope, frequencyAt, FREQUENCY_STEPS,
    patternPairs, patternFlops, measuredTimes, complexityCurves, describeComplexity, SIZES, PATTERNS,
  };
  if (typeof module !== "undefined" && module.exports) module.exports = pure;
  if (typeof window !== "undefined") window.BookPlaygrounds = pure;
  if (typeof document === "undefined") return; // under Node: no page to mount on

  function start() {
    for (const root of document.querySelectorAll(".live-playground[data-playground]")) {
      const mount = MOUNTS[root.dataset.playground];
      if (mount) mount(root);
      else console.warn(`live playground: unknown data-playground ${root.dataset.playground}`);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
