// The forget confirmation: its button stays disabled until the user id typed
// into the form is exactly the user's. The server checks the typed id again
// (and the CSRF token), so the form works, and is as safe, without this.
"use strict";
(function () {
  const form = document.getElementById("forget-form");
  if (!form) return;
  const expected = form.dataset.userId;
  const typed = document.getElementById("typed-user-id");
  const button = document.getElementById("forget-button");
  if (!typed || !button) return;
  function check() { button.disabled = typed.value !== expected; }
  typed.addEventListener("input", check);
  check();
})();
