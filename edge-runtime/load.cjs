// Loaded by the edge (also from inside the single executable, whose own require()
// only reaches built-in modules) to import the ESM node-llama-cpp from this folder.
module.exports = function loadLlama() {
  return import('node-llama-cpp');
};
