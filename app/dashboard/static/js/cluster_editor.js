// The node-group editor of the new-search form: a heterogeneous cluster as rows of groups
// (GPU type from the catalog, nodes, GPUs per node, bandwidths, zone, price) and zone links.

import { h } from "./dom.js";

const GROUP_COLUMNS = [
  ["name", "Name", "text"],
  ["gpu", "GPU", "gpu"],
  ["num_nodes", "Nodes", "int"],
  ["gpus_per_node", "GPUs / node", "int"],
  ["intra_node_GBps", "Intra-node GB/s", "float"],
  ["inter_node_GBps", "Inter-node GB/s", "float"],
  ["zone", "Zone", "text"],
  ["price_per_gpu_hour", "$ / GPU·h", "float"],
];

const LINK_COLUMNS = [
  ["zone_a", "Zone", "text"],
  ["zone_b", "Zone", "text"],
  ["bandwidth_GBps", "Bandwidth GB/s", "float"],
  ["latency_ms", "Latency ms", "float"],
];

const toNumber = (text) => (text === "" || text === null || text === undefined ? undefined : Number(text));

export class ClusterEditor {
  constructor({ groupsTable, linksTable, nameInput }) {
    this.groupsTable = groupsTable;
    this.linksTable = linksTable;
    this.nameInput = nameInput;
    this.gpus = [];
    this.groups = [];
    this.links = [];
  }

  setGpus(gpus) {
    this.gpus = gpus;
    if (!this.groups.length) this.addGroup();
    this.render();
  }

  addGroup(values = {}) {
    const index = this.groups.length;
    this.groups.push({
      name: `group-${index + 1}`,
      gpu: this.gpus[0]?.name || "H100-80GB",
      num_nodes: "1",
      gpus_per_node: "8",
      intra_node_GBps: "",
      inter_node_GBps: "",
      zone: "default",
      price_per_gpu_hour: "",
      ...values,
    });
    this.render();
  }

  addLink(values = {}) {
    this.links.push({ zone_a: "", zone_b: "", bandwidth_GBps: "", latency_ms: "", ...values });
    this.render();
  }

  /** Fill the editor from a ClusterSpec (e.g. a preset to start from). */
  load(spec) {
    this.nameInput.value = spec.name || "custom";
    this.groups = spec.groups.map((group) => {
      const row = {};
      for (const [key] of GROUP_COLUMNS) row[key] = group[key] === null || group[key] === undefined ? "" : String(group[key]);
      if (typeof group.gpu === "object") row.gpu = group.gpu.name;
      return row;
    });
    this.links = (spec.zone_links || []).map((link) => ({
      zone_a: link.zones[0],
      zone_b: link.zones[1],
      bandwidth_GBps: String(link.bandwidth_GBps),
      latency_ms: String(link.latency_ms),
    }));
    this.render();
  }

  /** The ClusterSpec the rows describe (empty optional cells left out). */
  spec() {
    const groups = this.groups.map((row) => {
      const group = { name: row.name, gpu: row.gpu, zone: row.zone || "default" };
      for (const key of ["num_nodes", "gpus_per_node", "intra_node_GBps", "inter_node_GBps", "price_per_gpu_hour"]) {
        const value = toNumber(row[key]);
        if (value !== undefined) group[key] = value;
      }
      return group;
    });
    const zoneLinks = this.links.map((row) => ({
      zones: [row.zone_a, row.zone_b],
      bandwidth_GBps: toNumber(row.bandwidth_GBps),
      latency_ms: toNumber(row.latency_ms) ?? 0,
    }));
    return { name: this.nameInput.value || "custom", groups, zone_links: zoneLinks };
  }

  render() {
    this.groupsTable.replaceChildren(
      h("thead", {}, h("tr", {}, GROUP_COLUMNS.map(([, label]) => h("th", { scope: "col" }, label)), h("th", {}, h("span", { class: "muted" }, "")))),
      h("tbody", {}, this.groups.map((row, index) => this.groupRow(row, index))),
    );
    this.linksTable.replaceChildren(
      this.links.length
        ? h("thead", {}, h("tr", {}, LINK_COLUMNS.map(([, label]) => h("th", { scope: "col" }, label)), h("th", {})))
        : h("caption", { class: "small muted", style: "text-align:left" }, "No zone links."),
      h("tbody", {}, this.links.map((row, index) => this.linkRow(row, index))),
    );
  }

  groupRow(row, index) {
    const gpu = this.gpus.find((candidate) => candidate.name === row.gpu)?.spec;
    const cells = GROUP_COLUMNS.map(([key, label, kind]) => {
      const field = `cluster.groups[${index}].${key}`;
      const aria = `Group ${index + 1} ${label}`;
      if (kind === "gpu") {
        const select = h(
          "select",
          { "data-field": field, "aria-label": aria },
          this.gpus.map((candidate) => h("option", { value: candidate.name, selected: candidate.name === row.gpu }, candidate.name)),
        );
        select.addEventListener("change", () => {
          row.gpu = select.value;
          this.render();
        });
        return h("td", {}, select);
      }
      const placeholder = gpu && (key === "intra_node_GBps" || key === "inter_node_GBps") ? String(gpu[key]) : "";
      const input = h("input", {
        type: kind === "text" ? "text" : "number",
        step: kind === "int" ? "1" : "any",
        value: row[key],
        placeholder,
        "data-field": field,
        "aria-label": aria,
        size: kind === "text" ? 9 : 5,
      });
      input.addEventListener("input", () => {
        row[key] = input.value;
      });
      return h("td", {}, input);
    });
    const remove = h("button", { type: "button", class: "danger", "aria-label": `Remove group ${index + 1}`, disabled: this.groups.length === 1 }, "Remove");
    remove.addEventListener("click", () => {
      this.groups.splice(index, 1);
      this.render();
    });
    return h("tr", {}, cells, h("td", {}, remove));
  }

  linkRow(row, index) {
    const cells = LINK_COLUMNS.map(([key, label, kind]) => {
      const field =
        key === "zone_a" || key === "zone_b" ? `cluster.zone_links[${index}].zones` : `cluster.zone_links[${index}].${key}`;
      const input = h("input", {
        type: kind === "text" ? "text" : "number",
        step: "any",
        value: row[key],
        "data-field": field,
        "aria-label": `Zone link ${index + 1} ${label}`,
        size: 9,
      });
      input.addEventListener("input", () => {
        row[key] = input.value;
      });
      return h("td", {}, input);
    });
    const remove = h("button", { type: "button", class: "danger", "aria-label": `Remove zone link ${index + 1}` }, "Remove");
    remove.addEventListener("click", () => {
      this.links.splice(index, 1);
      this.render();
    });
    return h("tr", {}, cells, h("td", {}, remove));
  }
}
