"use strict";
// Opens the payment menu that Swedbank Pay's view-payment script (loaded just before this one)
// defines, with the parameters the iOS SDK's v3 host page passes (swedbank-pay-sdk-ios
// SwedbankPayWebContent.swift, paymentTemplateV3), and tells the page that frames this one what happens.
(function () {
  const notify = (event, data) => {
    if (window.parent !== window) window.parent.postMessage({ source: "kassa-menu", event, data: data || {} }, "*");
  };
  if (!window.payex || !window.payex.hostedView) {
    notify("error", { detail: "the view-payment script did not load" });
    return;
  }
  window.payex.hostedView.checkout({
    integration: "App",
    container: { checkout: "checkout" },
    onEventNotification: (e) => notify("event", e),
    onError: (e) => notify("error", e),
    onPaid: (e) => notify("paid", e)
  }).open("checkout");
  notify("loaded");
})();
