// Line charts as inline SVG, drawn from numbers only (every label is set with
// textContent: nothing from the server is ever parsed as markup).
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 640, HEIGHT = 180, LEFT = 44, RIGHT = 8, TOP = 10, BOTTOM = 22;

  function node(name, attributes, parent) {
    const element = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) {
      element.setAttribute(key, String(value));
    }
    if (parent) parent.appendChild(element);
    return element;
  }

  function text(parent, x, y, words, anchor) {
    const label = node("text", {x: x, y: y, "text-anchor": anchor || "start", class: "axis"}, parent);
    label.textContent = words;
    return label;
  }

  // "10:15 UTC"; with the date ("11-30 10:15 UTC") on a chart of more than a few hours.
  function clock(ms, withDate) {
    const iso = new Date(ms).toISOString();
    return (withDate ? iso.slice(5, 10) + " " : "") + iso.slice(11, 16) + " UTC";
  }

  // series: [{name, cls, points: [[x ms, y], ...]}]; from, to: the x range (ms).
  function draw(container, series, from, to) {
    const svg = node("svg", {viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", class: "chart-svg"});
    let top = 1;
    for (const line of series) {
      for (const point of line.points) top = Math.max(top, point[1]);
    }
    const plotW = WIDTH - LEFT - RIGHT, plotH = HEIGHT - TOP - BOTTOM;
    const x = (ms) => LEFT + (to > from ? (ms - from) / (to - from) : 0) * plotW;
    const y = (value) => TOP + plotH - (value / top) * plotH;
    node("line", {x1: LEFT, y1: TOP + plotH, x2: WIDTH - RIGHT, y2: TOP + plotH, class: "grid"}, svg);
    node("line", {x1: LEFT, y1: TOP, x2: WIDTH - RIGHT, y2: TOP, class: "grid"}, svg);
    text(svg, LEFT - 4, TOP + 8, String(top), "end");
    text(svg, LEFT - 4, TOP + plotH, "0", "end");
    const withDate = to - from > 6 * 3600 * 1000;
    text(svg, LEFT, HEIGHT - 4, clock(from, withDate), "start");
    text(svg, WIDTH - RIGHT, HEIGHT - 4, clock(to, withDate), "end");
    let legendX = LEFT + 8;
    for (const line of series) {
      if (line.points.length) {
        const coords = line.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
        node("polyline", {points: coords.join(" "), class: `series ${line.cls}`}, svg);
      }
      node("rect", {x: legendX, y: TOP + 2, width: 10, height: 10, class: `key ${line.cls}`}, svg);
      const label = text(svg, legendX + 14, TOP + 11, line.name);
      legendX += 24 + 7 * line.name.length;
      label.setAttribute("class", "legend");
    }
    container.replaceChildren(svg);
  }

  window.PQCharts = {draw: draw};
}());
