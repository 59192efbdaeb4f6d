from distsched.redis_text import as_text


def test_bytes_str_and_numbers_become_text():
    assert as_text(b"default/p\xc3\xa9") == "default/pé"
    assert as_text("default/p") == "default/p"
    assert as_text(3) == "3"
    assert as_text(1.5) == "1.5"
