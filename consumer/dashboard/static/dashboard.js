// Reload the page every data-refresh seconds while the box is ticked (the choice is remembered).
(function () {
  var seconds = Number(document.body.dataset.refresh || 0);
  var box = document.getElementById("auto-refresh");
  if (!seconds || !box) { return; }
  box.checked = localStorage.getItem("consumer-dashboard-refresh") !== "off";
  box.addEventListener("change", function () {
    localStorage.setItem("consumer-dashboard-refresh", box.checked ? "on" : "off");
  });
  setInterval(function () { if (box.checked) { window.location.reload(); } }, seconds * 1000);
})();
