// The admin dashboard's live charts (templates/admin/evaluations/_live.html).
//
// The socket (audit/dashboard_live.py) first sends a snapshot: the stored evaluations that finished in
// the last hour, as tallies of 10 s, up to the second the socket joined the feed ("until"). Then every API
// process sends a tally of each second it was busy; they are added into the same 10 s buckets. A tally holds
// counts by status class, backend generations, a logarithmic latency histogram and a label-mass histogram,
// so percentiles over any span are read from summed histograms, whatever the number of processes.
(function () {
  "use strict";

  const root = document.getElementById("oj-live");
  if (!root || typeof uPlot === "undefined") {
    return;
  }
  const STATUS_LABELS = {
    answered: ["answered (200)", "#2e7d32"],
    client_error: ["client errors (4xx)", "#f9a825"],
    cancelled: ["cancelled / gone (499)", "#8d6e63"],
    overloaded: ["overloaded (529)", "#6a1b9a"],
    server_error: ["server errors (5xx)", "#c62828"],
  };
  const COLOURS = {rate: "#1565c0", p50: "#1565c0", p99: "#c62828", generations: "#00838f", mass: "#5d4037"};
  const state = {
    buckets: new Map(), // bucket start (s) -> {n, status, gen, lat: Map, mass: []}
    bucketSeconds: 10,
    spanSeconds: 3600,
    until: Infinity,
    perDecade: 20,
    massBins: 10,
    clockOffset: 0, // server time - browser time, in seconds
    liveSince: null, // the second this page started counting backend generations
    recentSeconds: 900, // the per-second charts show the last quarter of an hour, in 10 s bars
    charts: {},
    socket: null,
    retry: 1000,
    ticks: 0,
  };
  window.ojLive = state; // for the browser tests and for curious operators

  function now() {
    return Date.now() / 1000 + state.clockOffset;
  }

  function emptyBucket() {
    return {n: 0, status: {}, gen: null, lat: new Map(), mass: new Array(state.massBins).fill(0)};
  }

  function add(tally) {
    const start = Math.floor(tally.t / state.bucketSeconds) * state.bucketSeconds;
    let bucket = state.buckets.get(start);
    if (!bucket) {
      bucket = emptyBucket();
      state.buckets.set(start, bucket);
    }
    bucket.n += tally.n;
    for (const [kind, count] of Object.entries(tally.status)) {
      bucket.status[kind] = (bucket.status[kind] || 0) + count;
    }
    if (tally.gen !== null) {
      bucket.gen = (bucket.gen || 0) + tally.gen;
    }
    for (const [key, count] of Object.entries(tally.lat)) {
      const k = Number(key);
      bucket.lat.set(k, (bucket.lat.get(k) || 0) + count);
    }
    tally.mass.forEach((count, i) => { bucket.mass[i] += count; });
  }

  function forget() {
    const oldest = now() - state.spanSeconds;
    for (const start of state.buckets.keys()) {
      if (start + state.bucketSeconds <= oldest) {
        state.buckets.delete(start);
      }
    }
  }

  // Nearest-rank percentile of a latency histogram, as the middle of its bucket (log scale).
  function percentile(histogram, fraction) {
    let total = 0;
    for (const count of histogram.values()) {
      total += count;
    }
    if (total === 0) {
      return null;
    }
    const rank = Math.max(1, Math.ceil(fraction * total));
    let seen = 0;
    for (const key of [...histogram.keys()].sort((a, b) => a - b)) {
      seen += histogram.get(key);
      if (seen >= rank) {
        return Math.pow(10, (key + 0.5) / state.perDecade);
      }
    }
    return null;
  }

  function merged(buckets) {
    const histogram = new Map();
    for (const bucket of buckets) {
      for (const [key, count] of bucket.lat) {
        histogram.set(key, (histogram.get(key) || 0) + count);
      }
    }
    return histogram;
  }

  // Aligned x values over the last `span` seconds, to now, every `step` seconds.
  function axis(step, span) {
    const end = Math.floor(now() / step) * step;
    const xs = [];
    for (let x = end - Math.floor(span / step) * step; x <= end; x += step) {
      xs.push(x);
    }
    return xs;
  }

  function bucketsIn(start, step) {
    const found = [];
    for (let s = start; s < start + step; s += state.bucketSeconds) {
      const bucket = state.buckets.get(s);
      if (bucket) {
        found.push(bucket);
      }
    }
    return found;
  }

  // Per-second rate of a bucket; the bucket in progress counts only the seconds elapsed so far.
  function rate(start, value) {
    const elapsed = Math.min(state.bucketSeconds, Math.max(1, now() - start));
    return value / elapsed;
  }

  function series() {
    const tens = axis(state.bucketSeconds, state.recentSeconds);
    const minutes = axis(60, state.spanSeconds);
    const rates = tens.map((s) => rate(s, (state.buckets.get(s) || {n: 0}).n));
    const generations = tens.map((s) => {
      const bucket = state.buckets.get(s);
      const counted = state.liveSince !== null && s >= Math.floor(state.liveSince / state.bucketSeconds) *
        state.bucketSeconds;
      return counted ? rate(s, bucket && bucket.gen !== null ? bucket.gen : 0) : null;
    });
    const p50 = [];
    const p99 = [];
    const byStatus = Object.keys(STATUS_LABELS).map(() => []);
    for (const minute of minutes) {
      const inMinute = bucketsIn(minute, 60);
      const histogram = merged(inMinute);
      p50.push(percentile(histogram, 0.5));
      p99.push(percentile(histogram, 0.99));
      Object.keys(STATUS_LABELS).forEach((kind, i) => {
        byStatus[i].push(inMinute.reduce((sum, b) => sum + (b.status[kind] || 0), 0));
      });
    }
    const mass = new Array(state.massBins).fill(0);
    for (const bucket of state.buckets.values()) {
      bucket.mass.forEach((count, i) => { mass[i] += count; });
    }
    const centres = mass.map((_, i) => (i + 0.5) / state.massBins);
    return {rate: [tens, rates], generations: [tens, generations], latency: [minutes, p50, p99],
      status: [minutes, ...byStatus], mass: [centres, mass]};
  }

  // Time axes end one step after the newest value, so the newest point or bar is drawn whole.
  function timeRange(step) {
    return (u, min, max) => [min, max + step];
  }

  function chart(id, options, data) {
    const target = document.getElementById(id);
    const width = Math.max(320, target.clientWidth || 460);
    const made = new uPlot({width: width, height: 220, legend: {live: false}, ...options}, data, target);
    state.charts[id] = made;
    return made;
  }

  function draw() {
    forget();
    const data = series();
    const charts = state.charts;
    if (!charts["oj-chart-rate"]) {
      const bars = () => uPlot.paths.bars({size: [0.8, 40]});
      const tens = {x: {time: true, range: timeRange(state.bucketSeconds)}};
      const minutes = {x: {time: true, range: timeRange(60)}};
      const points = (colour) => ({show: true, size: 7, fill: colour});
      chart("oj-chart-rate", {scales: tens, series: [{}, {label: "evaluations / s", stroke: COLOURS.rate,
        fill: COLOURS.rate, paths: bars(), points: {show: false}}], axes: [{}, {size: 50}]}, data.rate);
      chart("oj-chart-latency", {scales: {...minutes, y: {distr: 3}},
        series: [{}, {label: "p50", stroke: COLOURS.p50, points: points(COLOURS.p50)},
          {label: "p99", stroke: COLOURS.p99, points: points(COLOURS.p99)}], axes: [{}, {size: 60}]}, data.latency);
      chart("oj-chart-status", {scales: minutes, series: [{}, ...Object.values(STATUS_LABELS).map(
        ([label, colour]) => ({label: label, stroke: colour, points: points(colour)}))], axes: [{}, {size: 50}]},
      data.status);
      chart("oj-chart-generations", {scales: tens, series: [{}, {label: "generations / s",
        stroke: COLOURS.generations, fill: COLOURS.generations, paths: bars(), points: {show: false}}],
      axes: [{}, {size: 50}]}, data.generations);
      chart("oj-chart-mass", {scales: {x: {time: false, range: [0, 1]}},
        series: [{label: "label mass"}, {label: "answers", stroke: COLOURS.mass, fill: COLOURS.mass,
          paths: bars(), points: {show: false}}], axes: [{}, {size: 50}]}, data.mass);
    } else {
      charts["oj-chart-rate"].setData(data.rate);
      charts["oj-chart-latency"].setData(data.latency);
      charts["oj-chart-status"].setData(data.status);
      charts["oj-chart-generations"].setData(data.generations);
      charts["oj-chart-mass"].setData(data.mass);
    }
    cards(data);
  }

  // Every process sends a tally each busy second: draw at most four times a second, whatever their number.
  let drawPending = false;
  function drawSoon() {
    if (!drawPending) {
      drawPending = true;
      window.setTimeout(() => { drawPending = false; draw(); }, 250);
    }
  }

  function cards(data) {
    const buckets = [...state.buckets.values()];
    const total = buckets.reduce((sum, b) => sum + b.n, 0);
    const answered = buckets.reduce((sum, b) => sum + (b.status.answered || 0), 0);
    const histogram = merged(buckets);
    const lastMinute = [...state.buckets.entries()].filter(([s]) => s >= now() - 60)
      .reduce((sum, [, b]) => sum + b.n, 0);
    const generations = data.generations[1].filter((g) => g !== null).slice(-6);
    const ms = (value) => (value === null ? "—" : `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`);
    text("oj-live-total", String(total));
    text("oj-live-rate", (lastMinute / 60).toFixed(2));
    text("oj-live-p50", ms(percentile(histogram, 0.5)));
    text("oj-live-p99", ms(percentile(histogram, 0.99)));
    text("oj-live-answered", total ? `${(100 * answered / total).toFixed(1)} %` : "—");
    text("oj-live-generations", generations.length ?
      (generations.reduce((a, b) => a + b, 0) / generations.length).toFixed(1) : "—");
  }

  function text(id, value) {
    const element = document.getElementById(id);
    if (element) {
      element.textContent = value;
    }
  }

  function status(kind, message) {
    const element = document.getElementById("oj-live-state");
    element.dataset.state = kind;
    element.textContent = message;
  }

  function snapshot(message) {
    state.buckets.clear();
    state.bucketSeconds = message.bucket_seconds;
    state.spanSeconds = message.span_seconds;
    state.until = message.until;
    state.perDecade = message.latency_buckets_per_decade;
    state.massBins = message.label_mass_bins;
    state.clockOffset = message.now - Date.now() / 1000;
    state.liveSince = message.until;
    message.tallies.forEach(add);
    if (message.truncated_before !== null) {
      text("oj-live-note", "Only the newest stored evaluations of the hour are shown: the database holds more " +
        "than the dashboard reads at once.");
    }
  }

  function connect() {
    const url = new URL("live", window.location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(url);
    state.socket = socket;
    socket.onopen = () => status("connecting", "loading the last hour…");
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "snapshot") {
        snapshot(message);
        state.retry = 1000;
        status("live", "● live");
        draw();
      } else if (message.type === "tick" && message.tally.t >= state.until) {
        add(message.tally);
        state.ticks += 1;
        drawSoon();
      }
    };
    socket.onclose = (event) => {
      if (event.code === 4403) {
        status("closed", `not shown: ${event.reason}`);
        return;
      }
      status("reconnecting", "reconnecting…");
      window.setTimeout(connect, state.retry);
      state.retry = Math.min(state.retry * 2, 30000);
    };
  }

  window.setInterval(() => { if (state.charts["oj-chart-rate"]) { draw(); } }, 5000);
  connect();
})();
