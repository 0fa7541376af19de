// The theme's buttons named by what they show (WCAG 2.5.3, "label in name": a speech user
// says what they see). pydata-sphinx-theme 0.17 names its search field "Search" while it
// shows "Search Ctrl+K", and its colour-mode button "Color mode" while it shows one icon
// titled "Light", "Dark" or "System Settings" (axe-core's rule label-content-name-mismatch,
// serious). Both buttons exist only where scripts run (class pst-js-only), so a script
// fixes them: the search field is named by its text, the colour button by what it does and
// the mode it shows ("Color mode: Dark"), kept up to date as a click changes the mode.
// book/_ext/book_reader.py adds this script to every page; tests/test_browser.py runs
// axe-core there.
(function () {
  "use strict";

  function nameSearchFieldsByTheirText() {
    for (const button of document.querySelectorAll(".search-button-field[aria-label]")) {
      button.removeAttribute("aria-label"); // its name is then its text: "Search Ctrl + K"
    }
  }

  function modeTitle(button, mode) {
    const icon = button.querySelector('.theme-switch[data-mode="' + mode + '"]');
    if (!icon) return "";
    // FontAwesome replaces the <i title> with an <svg> holding a <title>
    const title = icon.getAttribute("title") || (icon.querySelector("title") || {}).textContent;
    return (title || "").trim();
  }

  function nameColourButtons() {
    const mode = document.documentElement.dataset.mode || "auto";
    for (const button of document.querySelectorAll(".theme-switch-button")) {
      const label = button.dataset.bookLabel || button.getAttribute("aria-label") || "Color mode";
      button.dataset.bookLabel = label;
      const shown = modeTitle(button, mode);
      button.setAttribute("aria-label", shown ? label + ": " + shown : label);
    }
  }

  function start() {
    nameSearchFieldsByTheirText();
    nameColourButtons();
    new MutationObserver(nameColourButtons).observe(document.documentElement, {
      attributes: true,
      attributeFilter: ["data-mode"],
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
