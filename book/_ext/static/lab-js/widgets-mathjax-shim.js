// Two fixes for the ipywidgets HTML manager on a page that works offline. This file is loaded before
// require.js and the manager (see nb_ipywidgets_js in _config.yml).
//
// 1. The manager is a named AMD module; require.js resolves its URL, and from it the URL of the icon
//    fonts, against the page's own folder. Map its name to the local copy in _static/offline/npm/.
(function () {
  var here = document.currentScript && document.currentScript.src;
  if (!here) {
    return;
  }
  var npm = new URL("../offline/npm/", here).href;
  window.require = window.require || {};
  window.require.paths = Object.assign(window.require.paths || {}, {
    "@jupyter-widgets/html-manager/dist": npm + "@jupyter-widgets/html-manager/dist",
  });
})();

// 2. The ipywidgets HTML manager typesets widget output with MathJax 2's API
// (MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])); the book loads MathJax 3, which has no
// Hub, so every embedded widget threw "reading 'Queue'". Provide that one call on top of MathJax 3.
document.addEventListener("DOMContentLoaded", function () {
  if (window.MathJax === undefined || window.MathJax.Hub !== undefined) {
    return;
  }
  window.MathJax.Hub = {
    Queue: function () {
      Array.prototype.forEach.call(arguments, function (command) {
        if (!Array.isArray(command) || command[0] !== "Typeset") {
          return;
        }
        var element = command[2];
        var mj = window.MathJax;
        if (mj.startup && mj.startup.promise && mj.typesetPromise) {
          mj.startup.promise.then(function () {
            return mj.typesetPromise(element ? [element] : undefined);
          }).catch(function (err) { console.warn("MathJax typeset of a widget failed:", err); });
        }
      });
    },
  };
});
