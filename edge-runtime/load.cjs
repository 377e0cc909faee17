// Loaded by the edge (also from inside the single executable, whose own require()
// only reaches built-in modules) to import the ESM node-llama-cpp from this folder.
const { pathToFileURL } = require('node:url');

module.exports = function loadLlama() {
  return import('node-llama-cpp');
};

// node-llama-cpp tests its native binding in a forked child (fork() runs process.execPath,
// which in the single executable is the edge itself); the edge hands that child's script here.
module.exports.importFile = function importFile(path) {
  return import(pathToFileURL(path).href);
};
