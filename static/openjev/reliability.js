// Reliability diagrams in the admin (templates/admin/evaluations/_reliability.html): one uPlot chart per
// container, x = the bin's mean confidence, one series per setting (before / after calibration) and the
// diagonal of perfect calibration. Everything is local: the page works offline.
(function () {
  "use strict";
  var COLOURS = ["#c62828", "#2e7d32", "#1565c0", "#6a1b9a"];
  document.querySelectorAll("[data-oj-chart]").forEach(function (el) {
    var data = JSON.parse(document.getElementById(el.dataset.ojChart).textContent);
    var series = [{ label: "confidence" }];
    var columns = [data.x];
    data.series.forEach(function (s, i) {
      series.push({ label: s.label, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: true,
                    points: { show: true, size: 6 } });
      columns.push(s.values);
    });
    series.push({ label: "perfect", stroke: "#999", dash: [4, 4], points: { show: false } });
    columns.push(data.x);
    new uPlot({
      width: 460, height: 300,
      scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
      axes: [{ label: "confidence (bin)" }, { label: "accuracy" }],
      series: series
    }, columns, el);
  });
})();
