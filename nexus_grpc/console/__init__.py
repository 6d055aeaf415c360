"""``nexus-grpc console``: a web console in front of a running nexus-grpc server.

It holds no data and no rules: every page is gRPC calls through the typed
client (``nexus_grpc.client``) with the console's own key, so a key sees here
exactly what it sees through gRPC, and the key never reaches the browser.
It is client side (it never imports the server's modules) and installs with
``pip install 'nexus-grpc[console]'`` (Starlette, uvicorn, Jinja2).

- ``options``: its flags (nothing web here, so ``--help`` works without the extra).
- ``params``: a page's query string, checked.
- ``reads``: what each page asks the server.
- ``page_data``: messages as plain data: the JSON twin and what templates
  render; the graph's cap, its slider's range and its layout's entities.
- ``security``: Host and Origin checks, CSRF, the login (its token, its
  limits, each login's own cookie), the paths a browser is sent to.
- ``live``: the timeline's live states (WatchExtractions as Server-Sent
  Events) and how many such streams the console holds open.
- ``routes``: each page with its ``.json`` twin, the live states stream,
  the actions, login and logout.
- ``serve``: binds, prints the address (and token), serves with uvicorn.
- ``usage_chart``: /status's LLM usage as an inline SVG chart.
- ``templates/``, ``static/``: server-rendered HTML, the CSS and the scripts;
  ``static/vendor/`` holds cytoscape.js, copied from npm by ``clients/console-web/vendor.mjs``.
"""
