

def test_literal_html_shows_markup_and_line_breaks_as_text():
    from sofa_gui.view.tooltip import literal_html
    out = literal_html("<lambda> & <b>x</b>\nnext")
    assert "&lt;lambda&gt; &amp; &lt;b&gt;x&lt;/b&gt;" in out and "<b>" not in out
    assert "pre-wrap" in out and "\nnext" in out
