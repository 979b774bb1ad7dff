// One API key's usage per day in the admin (templates/admin/evaluations/apikey/usage.html): evaluations as bars
// and input tokens as a line over the last 30 days, one uPlot chart with an axis each (bars, so the two never
// hide each other when they rise together). Everything is local: the page works offline.
(function () {
  "use strict";
  document.querySelectorAll("[data-oj-usage]").forEach(function (el) {
    var data = JSON.parse(document.getElementById(el.dataset.ojUsage).textContent);
    var x = data.days.map(function (_, i) { return i; });
    new uPlot({
      width: 760, height: 280,
      scales: { x: { time: false, range: [-0.5, x.length - 0.5] }, evaluations: { range: function (u, min, max) { return [0, Math.max(1, max)]; } },
                tokens: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
      axes: [{ label: "day", values: function (u, ticks) { return ticks.map(function (t) {
                 return data.days[t] ? data.days[t].slice(5) : ""; }); } },
             { scale: "evaluations", label: "evaluations" },
             { scale: "tokens", label: "input tokens", side: 1, grid: { show: false } }],
      series: [{ label: "day", value: function (u, v) { return v == null ? "" : data.days[v]; } },
               { label: "evaluations", scale: "evaluations", stroke: "#1565c0", width: 2, fill: "rgba(21,101,192,0.25)",
                 paths: uPlot.paths.bars({ size: [0.6, 24] }), points: { show: false } },
               { label: "input tokens", scale: "tokens", stroke: "#c62828", width: 2 }]
    }, [x, data.evaluations, data.input_tokens], el);
  });
})();
