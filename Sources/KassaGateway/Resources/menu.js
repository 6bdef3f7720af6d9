"use strict";
// Opens the payment menu that Swedbank Pay's view-payment script (loaded just before this one)
// defines, as the SDKs' host page does, and tells the page that frames this one what happens.
(function () {
  const notify = (event, data) => {
    if (window.parent !== window) window.parent.postMessage({ source: "kassa-menu", event, data: data || {} }, "*");
  };
  if (!window.payex || !window.payex.hostedView) {
    notify("error", { detail: "the view-payment script did not load" });
    return;
  }
  window.payex.hostedView.checkout({
    container: { checkout: "checkout" },
    onCheckoutLoaded: (e) => notify("loaded", e),
    onPaid: (e) => notify("paid", e),
    onAborted: (e) => notify("aborted", e),
    onError: (e) => notify("error", e)
  }).open();
})();
