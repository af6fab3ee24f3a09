// Reload the page every data-refresh seconds while the box is ticked (the choice is remembered).
(function () {
  var seconds = Number(document.body.dataset.refresh || 0);
  var box = document.getElementById("auto-refresh");
  if (!seconds || !box) { return; }
  box.checked = localStorage.getItem("consumer-dashboard-refresh") !== "off";
  box.addEventListener("change", function () {
    localStorage.setItem("consumer-dashboard-refresh", box.checked ? "on" : "off");
  });
  // Not while an operator is typing into a form (a job kind's cap or rate): a reload loses it.
  function typing() {
    var fields = document.querySelectorAll("form[method=post] input:not([type=hidden])");
    return Array.prototype.some.call(fields, function (field) {
      return field.value !== "" || field === document.activeElement;
    });
  }
  setInterval(function () {
    if (box.checked && !typing()) { window.location.reload(); }
  }, seconds * 1000);
})();
